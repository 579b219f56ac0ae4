"""`m3 memory to-milvus DIR --uri URI` / `from-milvus NEW_DIR --uri URI`: move a robot's memory
between its SQLite directory and Milvus, verified by counts and a record-by-record comparison.
`m3 memory milvus-server DATA_DIR`: one Milvus (milvus-lite's server, server.py) for a fleet.

The copies print one JSON object (what was copied, the problems found) and exit 0 when the copy is
complete, 1 when the comparison found differences, 2 when nothing was done (see store_tools).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from m3_memory.cli_command import command, fail
from m3_memory.errors import StoreError
from m3_memory.milvus.backend import MilvusBackend, MilvusConfig
from m3_memory.milvus.server import MilvusLiteServer
from m3_memory.robot_ids import check_robot_id
from m3_memory.store.backend_copy import copy_memory, verify_copy
from m3_memory.store.from_rows import DEFAULT_TEXT_DIM, new_store_dir
from m3_memory.store.sqlite_backend import SqliteBackend
from m3_memory.store.sqlite_store import MemoryStore


def _robot_id(value: str) -> str:
    """argparse type: a valid robot id (one usage line and exit 2 otherwise)."""
    try:
        return check_robot_id(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _parser(prog: str, doc: str, directory_help: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"m3 memory {prog}", description=doc)
    parser.add_argument("memory_dir", help=directory_help)
    parser.add_argument("--uri", required=True, help="Milvus: http://host:19530, or a local directory (milvus-lite)")
    parser.add_argument("--prefix", default="m3", help="collection prefix (the node's milvus_collection_prefix)")
    parser.add_argument(
        "--robot-id", default="robot", type=_robot_id, help="the robot whose memory this is (the node's robot_id)"
    )
    return parser


def _milvus(args: argparse.Namespace, text_dim: int) -> MilvusBackend:
    config = MilvusConfig(uri=args.uri, collection_prefix=args.prefix, robot_id=args.robot_id)
    return MilvusBackend(config, text_dim)


def _report(copied: dict, problems: list[str], **where: str) -> int:
    print(json.dumps({**where, "copied": copied, "problems": problems}))
    return 1 if problems else 0


@command("to-milvus")
def to_milvus_main(argv: list[str] | None = None) -> int:
    """Copy a memory directory into Milvus, as robot --robot-id (which must hold nothing yet there)."""
    args = _parser("to-milvus", to_milvus_main.__doc__, "memory directory to copy (read only)").parse_args(argv)
    store = MemoryStore(args.memory_dir, create=False, readonly=True)
    try:
        source = SqliteBackend(store)
        text_dim = int(source.get_meta("text_dim") or DEFAULT_TEXT_DIM)
        destination = _milvus(args, text_dim)
        try:
            if destination.counters() or destination.load(text_dim).clips:
                raise StoreError(
                    f"Milvus at {args.uri} already holds a memory of robot {args.robot_id!r} (prefix {args.prefix!r}); "
                    "choose another --robot-id or --prefix (nothing was written)"
                )
            copied = copy_memory(source, destination, text_dim)
            problems = verify_copy(source, destination, text_dim)
        finally:
            destination.close()
    finally:
        store.close()
    return _report(copied, problems, memory_dir=store.memory_dir, uri=args.uri, robot_id=args.robot_id)


@command("from-milvus")
def from_milvus_main(argv: list[str] | None = None) -> int:
    """Copy robot --robot-id's memory from Milvus into a new memory directory."""
    args = _parser("from-milvus", from_milvus_main.__doc__, "new memory directory (missing or empty)").parse_args(argv)
    probe = _milvus(args, 0)  # the collections' own dimension
    text_dim = probe.text_dim
    probe.close()
    source = _milvus(args, text_dim)
    try:
        if not source.load(text_dim).clips:
            raise StoreError(
                f"Milvus at {args.uri} holds no memory of robot {args.robot_id!r} (prefix {args.prefix!r})"
            )
        with new_store_dir(args.memory_dir) as work:
            store = MemoryStore(work)
            try:
                destination = SqliteBackend(store)
                copied = copy_memory(source, destination, text_dim)
                problems = verify_copy(source, destination, text_dim)
            finally:
                store.close()
            if problems:
                raise StoreError(f"the copy differs from Milvus ({'; '.join(problems[:5])}); nothing was kept")
    finally:
        source.close()
    return _report(copied, problems, memory_dir=args.memory_dir, uri=args.uri, robot_id=args.robot_id)


@command("milvus-server")
def milvus_server_main(argv: list[str] | None = None) -> int:
    """Serve DATA_DIR with milvus-lite's gRPC server until Ctrl-C or SIGTERM (robots set milvus_uri to its URI)."""
    parser = argparse.ArgumentParser(prog="m3 memory milvus-server", description=milvus_server_main.__doc__)
    parser.add_argument("data_dir", help="the server's data directory (created when missing)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=19530, help="port to listen on (default 19530)")
    args = parser.parse_args(argv)
    if not 1 <= args.port <= 65535:
        parser.error(f"--port must be 1..65535, got {args.port}")
    server = MilvusLiteServer(args.data_dir, args.port, host=args.host)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SystemExit: the finally below stops the server
    try:
        server.start()
        print(json.dumps({"uri": server.uri, "data_dir": server.data_dir, "log": server.log_path}), flush=True)
        code = server.process.wait()
        return fail("milvus-server", f"the milvus-lite server exited with {code}; see {server.log_path}")
    except KeyboardInterrupt:
        return 0
    except RuntimeError as error:
        return fail("milvus-server", error)
    finally:
        server.stop()
