"""Command-line helpers over a memory directory, for `m3 memory export|check|import-reference`.

Each `*_main(argv) -> int` prints machine-readable JSON on stdout (the last line) and returns an
exit code: 0 ok, 1 problems found, 2 bad input (missing directory, refused pickle, newer schema).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from m3_memory.errors import StoreError
from m3_memory.store import DB_FILE, MemoryStore


def _open_existing(memory_dir: str) -> MemoryStore:
    path = os.path.abspath(os.path.expanduser(memory_dir))
    if not os.path.isfile(os.path.join(path, DB_FILE)):
        raise StoreError(f"no memory store in {path}")
    return MemoryStore(path, create=False)


def export_main(argv: list[str] | None = None) -> int:
    """Write the whole memory as JSON (to --output, or stdout)."""
    parser = argparse.ArgumentParser(prog="m3 memory export", description=export_main.__doc__)
    parser.add_argument("memory_dir")
    parser.add_argument("--output", "-o", help="file to write (default: stdout)")
    parser.add_argument("--embeddings", action="store_true", help="include embedding vectors")
    args = parser.parse_args(argv)
    try:
        store = _open_existing(args.memory_dir)
    except StoreError as error:
        print(f"m3 memory export: error: {error}", file=sys.stderr)
        return 2
    try:
        data = store.export_json(include_embeddings=args.embeddings)
    finally:
        store.close()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
        print(json.dumps({"output": os.path.abspath(args.output), "clips": len(data["clips"]),
                          "text_nodes": len(data["text_nodes"]), "entities": len(data["entities"])}))  # fmt: skip
    else:
        print(json.dumps(data))
    return 0


def check_main(argv: list[str] | None = None) -> int:
    """Run the integrity check; exit 1 when problems are found."""
    parser = argparse.ArgumentParser(prog="m3 memory check", description=check_main.__doc__)
    parser.add_argument("memory_dir")
    args = parser.parse_args(argv)
    try:
        store = _open_existing(args.memory_dir)
    except StoreError as error:
        print(json.dumps({"ok": False, "problems": [str(error)]}))
        return 2
    try:
        problems = store.integrity_check()
    finally:
        store.close()
    print(json.dumps({"ok": not problems, "problems": problems}))
    return 0 if not problems else 1


def import_reference_main(argv: list[str] | None = None) -> int:
    """Import a reference M3-Agent VideoGraph pickle (only with --trust-pickle)."""
    parser = argparse.ArgumentParser(prog="m3 memory import-reference", description=import_reference_main.__doc__)
    parser.add_argument("pickle_file")
    parser.add_argument("memory_dir")
    parser.add_argument("--trust-pickle", action="store_true", help="I made this file; read it (restricted unpickler)")
    args = parser.parse_args(argv)
    from m3_memory.memory import Memory
    from m3_memory.reference_import import UntrustedPickleError, import_reference

    try:
        memory = Memory.open(args.memory_dir)
    except StoreError as error:
        print(f"m3 memory import-reference: error: {error}", file=sys.stderr)
        return 2
    try:
        summary = import_reference(memory, args.pickle_file, trusted=args.trust_pickle)
    except (UntrustedPickleError, ValueError, OSError) as error:
        print(f"m3 memory import-reference: error: {error}", file=sys.stderr)
        return 2
    finally:
        memory.close()
    print(json.dumps(summary.__dict__))
    return 0
