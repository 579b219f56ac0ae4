"""`m3 bench memory --nodes N`: ingest N synthetic memories, then measure search and service latency.

Prints progress to stderr and, as the LAST stdout line, one JSON object: nodes, search_p50_ms,
search_p99_ms, service_p99_ms, recall_at_10 (hnswlib top-10 against exact search on the same
vectors), ingest_nodes_per_s (embedding + one transaction per clip + indexing), disk_bytes_per_node.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time

import numpy as np

from m3_memory.graph import MemorizerOutput
from m3_memory.memory import Memory
from m3_memory.records import KIND_EPISODIC, ClipEvidence, MemoryDraft

OBJECTS = "keys phone wallet glasses red folder blue mug laptop charger umbrella scarf passport notebook remote".split()
PLACES = "drawer shelf kitchen table sofa garage backpack desk fridge hallway bathroom car window balcony".split()
VERBS = "put left hid placed dropped found moved stored".split()
NS = 1_000_000_000


def synthetic_texts(n: int, people: int = 40) -> list[str]:
    """n distinct, deterministic memory sentences about `people` voices."""
    out = []
    for i in range(n):
        who = f"<voice_{i % people + 1}>"
        obj, place, verb = OBJECTS[i % len(OBJECTS)], PLACES[(i // 3) % len(PLACES)], VERBS[(i // 7) % len(VERBS)]
        out.append(f"{who} {verb} the {obj} in the {place} at minute {i // 50} (event {i}).")
    return out


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def ingest(memory: Memory, texts: list[str], per_clip: int, people: int) -> float:
    """Store texts as episodic memories, per_clip per clip; returns nodes per second."""
    graph = memory.graph
    start = time.perf_counter()
    base = memory.next_clip_index
    for c, offset in enumerate(range(0, len(texts), per_clip)):
        chunk = texts[offset : offset + per_clip]
        t0 = (base + c) * 30 * NS
        with graph.ingest_lock:
            new = [f"voice_{p + 1}" for p in range(people)] if c == 0 and not graph.entities else []
            mapped = graph.predict_new_ids(new)
            drafts = [
                MemoryDraft(KIND_EPISODIC, text, t0 + i * NS // 10, t0 + i * NS // 10) for i, text in enumerate(chunk)
            ]
            vectors = memory.embedder.embed(chunk)
            graph.apply_clip(
                ClipEvidence(base + c, t0, t0 + 30 * NS), dict(mapped), MemorizerOutput(drafts), vectors, new
            )
        if c % 20 == 0:
            print(f"ingested {offset + len(chunk)}/{len(texts)}", file=sys.stderr, flush=True)
    return len(texts) / (time.perf_counter() - start)


def recall_at_10(memory: Memory, queries: np.ndarray) -> float:
    """hnswlib's top-10 against exact cosine top-10 over the same stored vectors."""
    graph = memory.graph
    seqs = sorted(graph.text_by_seq)
    matrix = np.stack([graph.text_index.vector(s) for s in seqs])
    found = 0
    for query in queries:
        exact = {seqs[i] for i in np.argsort(-(matrix @ query))[:10]}
        approx = {label for label, _ in graph.text_index.search(query, 10)}
        found += len(exact & approx)
    return found / (10 * len(queries))


def service_latencies(memory_dir: str, embedder, queries: list[str]) -> list[float]:
    """search_node through the real service over DDS (node and client in this process)."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from m3_interfaces.srv import SearchNode
    from m3_memory.memory_node import MemoryNode

    rclpy.init()
    node = MemoryNode(embedder=embedder, parameter_overrides=[Parameter("memory_dir", value=memory_dir)])
    server = MultiThreadedExecutor()
    server.add_node(node)
    thread = threading.Thread(target=server.spin, daemon=True)
    thread.start()
    client_node = Node("memory_bench_client")
    client = client_node.create_client(SearchNode, "/m3/memory/search_node")
    local = SingleThreadedExecutor()
    local.add_node(client_node)
    latencies = []
    try:
        if not client.wait_for_service(timeout_sec=30.0):
            raise RuntimeError("search_node service did not appear")
        for query in queries:
            begin = time.perf_counter()
            future = client.call_async(SearchNode.Request(query=query, top_k=10))
            local.spin_until_future_complete(future, timeout_sec=30.0)
            if not future.done() or future.result().error_code != 0:
                raise RuntimeError(f"search_node failed for {query!r}")
            latencies.append((time.perf_counter() - begin) * 1000.0)
    finally:
        server.shutdown()
        local.shutdown()
        client_node.destroy_node()
        node.destroy_node()
        rclpy.try_shutdown()
    return latencies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m3 bench memory", description=__doc__)
    parser.add_argument("--nodes", type=int, default=10000, help="memories to ingest (default 10000)")
    parser.add_argument("--queries", type=int, default=200, help="search queries to time (default 200)")
    parser.add_argument("--per-clip", type=int, default=50, help="memories per clip (default 50)")
    parser.add_argument("--memory-dir", help="memory directory (default: a new temporary one)")
    parser.add_argument("--no-service", action="store_true", help="skip the DDS service measurement")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.queries < 1 or args.per_clip < 1:
        parser.error("--nodes, --queries and --per-clip must be >= 1")
    tmp = None
    memory_dir = args.memory_dir
    if not memory_dir:
        tmp = tempfile.TemporaryDirectory(prefix="m3_bench_memory_")
        memory_dir = tmp.name
    people = 40
    memory = Memory.open(memory_dir)
    embedder = memory.embedder
    before = len(memory.graph.text)
    rate = ingest(memory, synthetic_texts(args.nodes, people), args.per_clip, people)
    rng = np.random.default_rng(0)
    queries = []
    for i in range(args.queries):  # distinct texts: the embedder's cache must not flatter the figures
        who, obj = rng.integers(1, people + 1), OBJECTS[rng.integers(len(OBJECTS))]
        queries.append(f"where did <voice_{who}> {VERBS[i % len(VERBS)]} the {obj}? (query {i})")
    latencies = []
    for query in queries:
        begin = time.perf_counter()
        memory.search.search_node(query, top_k=10)
        latencies.append((time.perf_counter() - begin) * 1000.0)
    recall = recall_at_10(memory, embedder.embed(queries[: min(100, len(queries))]))
    memory.store.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    disk = memory.store.disk_bytes()
    nodes = len(memory.graph.text)
    memory.close()
    service = [] if args.no_service else service_latencies(memory_dir, embedder, [q + " again" for q in queries[:100]])
    result = {
        "nodes": nodes,
        "nodes_added": nodes - before,
        "search_p50_ms": round(percentile(latencies, 50), 3),
        "search_p99_ms": round(percentile(latencies, 99), 3),
        "service_p99_ms": round(percentile(service, 99), 3) if service else None,
        "recall_at_10": round(recall, 4),
        "ingest_nodes_per_s": round(rate, 1),
        "disk_bytes_per_node": round(disk / max(nodes, 1), 1),
        "memory_dir": os.path.abspath(memory_dir) if args.memory_dir else None,
    }
    print(json.dumps(result), flush=True)
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
