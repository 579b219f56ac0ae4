"""`m3 memory export | import | check | stats | import-reference`: tools over a memory directory.

Each `*_main(argv) -> int` prints one JSON object as its last stdout line and returns an exit code:
0 ok, 1 problems found (a damaged store, or a repaired copy that still has problems), 2 nothing
done (no store, a file that is not a memory store, a newer schema, a refused export or pickle).
Errors are one line on stderr: what is wrong and what to do. Stores are opened read-only except
by the imports, which build a new store aside and move it into place only once it is complete.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from m3_memory.cli_command import command, fail
from m3_memory.errors import StoreError
from m3_memory.store.sqlite_store import MemoryStore


@contextmanager
def _reading(memory_dir: str) -> Iterator[MemoryStore]:
    """The store opened read-only; damage quick_check cannot see (bad JSON, bad UTF-8) is a StoreError."""
    store = MemoryStore(memory_dir, create=False, readonly=True)
    try:
        yield store
    except (sqlite3.DatabaseError, ValueError) as error:
        raise StoreError(
            f"memory store {store.db_path} is damaged: {error}; `m3 memory check {store.memory_dir}` lists the "
            "problems and `--repair NEW_DIR` salvages the rest"
        ) from error
    finally:
        store.close()


@command("export")
def export_main(argv: list[str] | None = None) -> int:
    """Write the whole memory as JSON (to --output, or stdout); with --embeddings it can be imported."""
    parser = argparse.ArgumentParser(prog="m3 memory export", description=export_main.__doc__)
    parser.add_argument("memory_dir")
    parser.add_argument("--output", "-o", help="file to write (default: stdout)")
    parser.add_argument("--embeddings", action="store_true", help="include embedding vectors (needed by import)")
    args = parser.parse_args(argv)
    with _reading(args.memory_dir) as store:
        data = store.export_json(include_embeddings=args.embeddings)
    if not args.output:
        print(json.dumps(data))
        return 0
    output = os.path.abspath(args.output)
    with open(output + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
    os.replace(output + ".tmp", output)  # never a half-written export under the name asked for
    counts = {name: len(data[name]) for name in ("clips", "text_nodes", "entities")}
    print(json.dumps({"output": output, "embeddings": args.embeddings, **counts}))
    return 0


@command("import")
def import_main(argv: list[str] | None = None) -> int:
    """Make a new memory directory from an export written with --embeddings."""
    from m3_memory.store.importer import MAX_EXPORT_BYTES, import_export

    parser = argparse.ArgumentParser(prog="m3 memory import", description=import_main.__doc__)
    parser.add_argument("export_file", help="JSON from `m3 memory export DIR --embeddings -o FILE`")
    parser.add_argument("memory_dir", help="new memory directory (must not exist, or be empty)")
    parser.add_argument("--max-bytes", type=int, default=MAX_EXPORT_BYTES, help="largest export to read")
    args = parser.parse_args(argv)
    print(json.dumps(import_export(args.export_file, args.memory_dir, args.max_bytes)))
    return 0


@command("check")
def check_main(argv: list[str] | None = None) -> int:
    """Check a memory's integrity (read-only); exit 1 when it is damaged. --repair NEW_DIR copies
    what SQLite can still read into a new store, leaving the damaged one untouched."""
    from m3_memory.store.repair import salvage

    parser = argparse.ArgumentParser(prog="m3 memory check", description=check_main.__doc__)
    parser.add_argument("memory_dir")
    parser.add_argument("--repair", metavar="NEW_DIR", help="salvage into this new directory (must not exist)")
    args = parser.parse_args(argv)
    memory_dir = os.path.abspath(os.path.expanduser(args.memory_dir))
    try:
        store = MemoryStore(memory_dir, create=False, readonly=True, verify=False)
    except StoreError as error:
        return fail("check", error, {"ok": False, "memory_dir": memory_dir, "problems": [str(error)]})
    try:
        problems = store.integrity_check()
    finally:
        store.close()
    report: dict = {"ok": not problems, "memory_dir": memory_dir, "problems": problems}
    if args.repair:
        try:
            report["repair"] = salvage(memory_dir, args.repair)
        except StoreError as error:
            return fail("check", f"nothing was salvaged: {error}", report)
        left = report["repair"]["problems"]
        print(
            f"m3 memory check: salvaged {memory_dir} into {report['repair']['output']}"
            + (f"; it still has {len(left)} problem(s), listed in the JSON" if left else ""),
            file=sys.stderr,
        )
        print(json.dumps(report))
        return 1 if left else 0
    if problems:
        print(
            f"m3 memory check: {memory_dir} is damaged ({len(problems)} problem(s), listed in the JSON); "
            f"salvage it with: m3 memory check {memory_dir} --repair NEW_DIR",
            file=sys.stderr,
        )
    print(json.dumps(report))
    return 0 if not problems else 1


@command("stats")
def stats_main(argv: list[str] | None = None) -> int:
    """Count what a memory holds: clips, memories by kind, faces, voices, persons and their names."""
    from m3_memory.store.check import counts

    parser = argparse.ArgumentParser(prog="m3 memory stats", description=stats_main.__doc__)
    parser.add_argument("memory_dir")
    args = parser.parse_args(argv)
    with _reading(args.memory_dir) as store:
        report = {"memory_dir": store.memory_dir, "schema_version": store.schema_version, **counts(store.conn())}
        report["disk_bytes"] = store.disk_bytes()
    print(json.dumps(report))
    return 0


@command("import-reference")
def import_reference_main(argv: list[str] | None = None) -> int:
    """Import a reference M3-Agent VideoGraph pickle (only with --trust-pickle). The pickle is read and
    checked first; a new memory directory is created only for a pickle that passed."""
    from m3_memory.memory import Memory
    from m3_memory.store.from_rows import new_store_dir
    from m3_memory.store.reference_import import MAX_PICKLE_BYTES, import_reference_graph, load_reference_pickle
    from m3_memory.store.sqlite_store import DB_FILE

    parser = argparse.ArgumentParser(prog="m3 memory import-reference", description=import_reference_main.__doc__)
    parser.add_argument("pickle_file")
    parser.add_argument("memory_dir", help="memory directory to add to (created when missing)")
    parser.add_argument("--trust-pickle", action="store_true", help="I made this file; read it (restricted unpickler)")
    parser.add_argument("--max-bytes", type=int, default=MAX_PICKLE_BYTES, help="largest pickle to read")
    args = parser.parse_args(argv)
    graph = load_reference_pickle(args.pickle_file, args.trust_pickle, args.max_bytes)

    def run(memory_dir: str) -> dict:
        memory = Memory.open(memory_dir)
        try:
            return import_reference_graph(memory, graph).__dict__
        finally:
            memory.close()

    if os.path.lexists(os.path.join(os.path.expanduser(args.memory_dir), DB_FILE)):
        summary = run(args.memory_dir)
    else:
        with new_store_dir(args.memory_dir) as work:
            summary = run(work)
    print(json.dumps(summary))
    return 0


def to_milvus_main(argv: list[str] | None = None) -> int:
    from m3_memory.milvus.tools import to_milvus_main as run

    return run(argv)


def from_milvus_main(argv: list[str] | None = None) -> int:
    from m3_memory.milvus.tools import from_milvus_main as run

    return run(argv)


def milvus_server_main(argv: list[str] | None = None) -> int:
    from m3_memory.milvus.tools import milvus_server_main as run

    return run(argv)


COMMANDS: dict[str, Callable[[list[str] | None], int]] = {
    "check": check_main,
    "from-milvus": from_milvus_main,
    "to-milvus": to_milvus_main,
    "export": export_main,
    "import": import_main,
    "import-reference": import_reference_main,
    "milvus-server": milvus_server_main,
    "stats": stats_main,
}
