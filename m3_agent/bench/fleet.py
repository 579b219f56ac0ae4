"""`m3 bench fleet`: several robots share one Milvus (a milvus-lite server started here) while it restarts.

--robots processes store clips (each clip --per-clip episodic memories, the memory node's per-clip
write path: MemoryGraph.apply_clip on the Milvus back-end, fleet members with their own slots) while
--searchers processes search the whole fleet's memories in Milvus; the server is killed (SIGKILL)
and restarted in the middle. Robots buffer clips on disk meanwhile and write them when it is back.
Last stdout line, one JSON object: ingest_per_s (memories stored per second, all robots), search_p50_ms,
search_p99_ms, search_errors (searches refused while the server was away), lost and duplicated
(memories missing from Milvus or in a clip whose record is missing, and memories stored more than
once, at the end: both must be 0), restart_s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

NS = 1_000_000_000
DIM = 384


def _backend(uri: str, prefix: str, robot: str, slot: int, spool: str):
    from m3_memory.milvus.backend import MilvusBackend, MilvusConfig

    config = MilvusConfig(uri=uri, collection_prefix=prefix, robot_id=robot, fleet_slot=slot, spool_dir=spool)
    return MilvusBackend(config, DIM)


def robot_main(uri: str, prefix: str, robot: str, slot: int, spool: str, clips: int, per_clip: int) -> int:
    """One robot: clips of random unit vectors (storage is measured, not the text model)."""
    from m3_memory.errors import StoreError
    from m3_memory.graph.memory_graph import MemorizerOutput, MemoryGraph
    from m3_memory.graph.records import KIND_EPISODIC, ClipEvidence, MemoryDraft

    deadline = time.monotonic() + 120.0
    while True:  # a robot starting while the server is away waits for it (its node would retry too)
        try:
            graph = MemoryGraph(_backend(uri, prefix, robot, slot, spool), DIM)
            break
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    rng = np.random.default_rng(slot)
    begin = time.perf_counter()
    for index in range(clips):
        start = index * 30 * NS
        drafts = [
            MemoryDraft(KIND_EPISODIC, f"{robot} event {index}.{i}", start + i, start + i) for i in range(per_clip)
        ]
        vectors = rng.normal(size=(per_clip, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        graph.apply_clip(ClipEvidence(index, start, start + 30 * NS), {}, MemorizerOutput(drafts), vectors, [])
    while graph.backend.spool.pending() and time.monotonic() < deadline + 120.0:
        try:  # a robot that stays up writes its buffered clips once the server is back
            graph.backend.flush_spool()
        except (StoreError, *graph.backend._errors):
            time.sleep(0.5)
    graph.backend.close()
    print(json.dumps({"robot": robot, "seconds": time.perf_counter() - begin}), flush=True)
    return 0


def searcher_main(uri: str, prefix: str, stop_file: str) -> int:
    from pymilvus.exceptions import MilvusException

    from m3_memory.errors import StoreError

    latencies, errors = [], 0
    backend = None
    while backend is None:  # a searcher that starts during the outage (a loaded machine) waits for the server
        try:
            backend = _backend(uri, prefix, "searcher", 0, os.path.join(os.path.dirname(stop_file), "spool_searcher"))
        except StoreError:
            if os.path.exists(stop_file):
                print(json.dumps({"latencies_ms": latencies, "errors": errors + 1}), flush=True)
                return 0
            errors += 1
            time.sleep(0.2)
    rng = np.random.default_rng(99)
    while not os.path.exists(stop_file):
        vector = rng.normal(size=DIM).astype(np.float32)
        begin = time.perf_counter()
        try:
            backend.search_text(vector / np.linalg.norm(vector), 10)
            latencies.append((time.perf_counter() - begin) * 1000.0)
        except StoreError:  # the server is away or reloading: a refused search, counted
            errors += 1
            time.sleep(0.2)
            try:
                backend._ensure_collections()  # a restarted server holds the collections released
            except (MilvusException, OSError):
                pass
    print(json.dumps({"latencies_ms": latencies, "errors": errors}), flush=True)
    return 0


def _count(uri: str, prefix: str, robot: str) -> tuple[int, int]:
    """(text rows, distinct memories a reload keeps) of robot: a memory counts only when its clip record
    is stored too (a robot's load ignores the text rows of a clip that is not listed)."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri)
    for name in (f"{prefix}_text", f"{prefix}_records"):
        client.load_collection(name)
    rows = client.query(
        f"{prefix}_text", filter=f'robot_id == "{robot}"', output_fields=["node_id", "clip_index"], limit=16384
    )
    clips = client.query(
        f"{prefix}_records", filter=f'robot_id == "{robot}" and kind == "clip"', output_fields=["key"], limit=16384
    )
    client.close()
    listed = {int(row["key"].rsplit("/", 1)[1]) for row in clips}
    return len(rows), len({row["node_id"] for row in rows if row["clip_index"] in listed})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m3 bench fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--robots", type=int, default=3, help="robot processes storing clips (default 3)")
    parser.add_argument("--searchers", type=int, default=2, help="processes searching the fleet (default 2)")
    parser.add_argument("--clips", type=int, default=40, help="clips per robot (default 40)")
    parser.add_argument("--per-clip", type=int, default=50, help="memories per clip (default 50)")
    parser.add_argument("--outage-s", type=float, default=3.0, help="how long the server stays down (default 3)")
    parser.add_argument("--kill-after-s", type=float, default=5.0, help="when the server is killed (default 5)")
    parser.add_argument("--role", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        role, *rest = args.role
        if role == "robot":
            return robot_main(rest[0], rest[1], rest[2], int(rest[3]), rest[4], int(rest[5]), int(rest[6]))
        return searcher_main(*rest)
    if min(args.robots, args.clips, args.per_clip) < 1 or args.robots > 999 or args.clips * args.per_clip > 16000:
        parser.error("--robots 1..999, --clips and --per-clip >= 1, at most 16000 memories per robot")
    from m3_memory.milvus.server import MilvusLiteServer

    work = tempfile.mkdtemp(prefix="m3_bench_fleet_")
    server = MilvusLiteServer(os.path.join(work, "milvus")).start()
    prefix, stop_file, me = "fleet", os.path.join(work, "stop"), [sys.executable, "-m", "m3_agent.bench.fleet"]
    searchers = [subprocess.Popen([*me, "--role", "searcher", server.uri, prefix, stop_file], stdout=subprocess.PIPE,
                                  text=True) for _ in range(args.searchers)]  # fmt: skip
    robots = {f"robot_{i}": subprocess.Popen(
        [*me, "--role", "robot", server.uri, prefix, f"robot_{i}", str(i), os.path.join(work, f"spool_{i}"),
         str(args.clips), str(args.per_clip)], stdout=subprocess.PIPE, text=True) for i in range(1, args.robots + 1)
    }  # fmt: skip
    begin = time.perf_counter()
    time.sleep(args.kill_after_s)  # robots and searchers at work
    server.stop(kill=True)
    down = time.perf_counter()
    time.sleep(args.outage_s)
    server.start()
    restart_s = time.perf_counter() - down
    failed = [name for name, proc in robots.items() if proc.wait() != 0]
    ingest_s = time.perf_counter() - begin
    open(stop_file, "w").close()
    results = [json.loads(proc.communicate()[0].strip().splitlines()[-1]) for proc in searchers]
    latencies = sorted(x for r in results for x in r["latencies_ms"])
    lost = duplicated = 0
    for name in robots:
        rows, distinct = _count(server.uri, prefix, name)
        lost += args.clips * args.per_clip - distinct
        duplicated += rows - distinct
    server.stop()
    shutil.rmtree(work, ignore_errors=True)

    def pct(q: float) -> float | None:
        return round(float(np.percentile(latencies, q)), 3) if latencies else None

    print(json.dumps({
        "robots": args.robots, "searchers": args.searchers, "memories": args.robots * args.clips * args.per_clip,
        "ingest_per_s": round(args.robots * args.clips * args.per_clip / ingest_s, 1),
        "search_p50_ms": pct(50), "search_p99_ms": pct(99), "searches": len(latencies),
        "search_errors": sum(r["errors"] for r in results), "restart_s": round(restart_s, 2),
        "lost": lost, "duplicated": duplicated, "failed_robots": failed, "load": os.getloadavg()[0],
    }), flush=True)  # fmt: skip
    return 1 if failed or lost or duplicated else 0


if __name__ == "__main__":
    sys.exit(main())
