"""`m3 bench memory --nodes N`: build a memory of N episodic memories, then time search and the service.

Prints progress to stderr and, as the LAST stdout line, one JSON object:

- nodes, nodes_added;
- embedding: how the node vectors were made. The texts are varied memory sentences
  (bench_texts.py: ten templates, a dozen slots). "minilm": every text embedded with the default
  embedder. "sentence_set:S": the first S texts are embedded with MiniLM (cached with
  --embedding-cache); text i >= S says what text i mod S says with another event number, and its
  vector is that text's MiniLM vector plus Gaussian jitter (cosine about 0.99, the cosine MiniLM
  gives two sentences that differ only in their event number). MiniLM embeds 180-200 of these
  sentences/s on 2 shared cores (onnxruntime), so embedding 1M texts would take about 1.5 hours; the default S is
  max(10000, N/10): each sentence recurs at most 10 times, as a robot's routine events do.
- embed_nodes_per_s: MiniLM rate while embedding the node texts (null when all came from the cache);
- ingest_mode ("bulk": Memory.ingest_bulk, one transaction and one batched index insert per
  --batch memories; "clip": MemoryGraph.apply_clip, one transaction per clip, as the node does);
- ingest_nodes_per_s: nodes stored per second with the vectors ready (SQLite + index; no embedding);
- embed_p50_ms, embed_p99_ms: embedding one fresh query text (all its alias variants) with MiniLM;
- search_p50_ms, search_p99_ms: in-process search_node(top_k=10) with the query embedding already in
  the embedder's LRU cache (a repeated query): alias expansion + ANN search + filtering + results;
- search_cold_p99_ms: the same call for a query never seen (embedding included);
- service_p50_ms, service_p99_ms: search_node over the ROS service from a client in ANOTHER process,
  repeated queries (embedding cached in the node); service_cold_p99_ms: fresh queries;
- search_time_p50_ms / _p99_ms, search_place_p50_ms / _p99_ms, recall_at_10_time / _place: search_node with a
  time window (1 % of the memory's time span) or a place filter (3 m around a point of the robot's path; every
  bench clip is one leg of a walk through a 50 m square), against the exact filtered top-10 (memory_search.py);
  search_time_first_ms / search_place_first_ms (and milvus_search_..._first_ms): the first such search after
  opening, left out of the percentiles (one-off costs: pages and caches touched for the first time);
  with --backend milvus also milvus_search_time_p50_ms / _p99_ms, milvus_search_place_p50_ms / _p99_ms and
  milvus_recall_at_10_time / _place: the same windows searched in Milvus with its scalar filters (end_ns, the
  place columns' box, then the exact circle on the hits), as a fleet search reads other robots' memories;
- recall_at_10: the text index's top-10 against exact cosine top-10 over the same stored vectors;
  recall_at_10_eps: ann-benchmarks' recall (a result counts when its cosine is within 0.001 of the
  exact 10th best), which does not count misses among near-ties;
- hnsw: M, ef_construction, ef; open_s: seconds to reopen the memory (saved index, no rebuild);
- disk_bytes_per_node; peak_rss_mb: the bench process's peak resident memory (building included);
- backend: --backend sqlite (the default store) or milvus (m3_agent.bench.memory_backend: a milvus-lite
  server started here, or --milvus-uri; search runs in the memory's own index either way).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from m3_agent.bench.memory_backend import BenchBackend
from m3_agent.bench.memory_search import clip_path, recall_at_10, window_figures
from m3_agent.bench.texts import OBJECTS, VERBS, sentences
from m3_memory.graph.memory_graph import MemorizerOutput
from m3_memory.graph.records import KIND_EPISODIC, ClipEvidence, MemoryDraft
from m3_memory.memory import Memory
from m3_memory.store import ann_index

NS = 1_000_000_000
CACHE_CHUNK = 4096  # texts per embedding cache file
JITTER_SIGMA = 0.0073  # per coordinate: |noise|^2 = 384 * sigma^2 = 0.0205, cosine to the base about 0.99


DEFAULT_EMBEDDING_CACHE = "~/.cache/m3-agent/bench"  # shared with `m3 bench control`


def synthetic_texts(n: int, people: int = 40, sentence_set: int = 0) -> list[str]:
    """n distinct, deterministic memory sentences about `people` entities (bench_texts); with a sentence
    set of S, text i says what text i mod S says (another event number)."""
    period = sentence_set if 0 < sentence_set < n else n
    base = sentences(period, people)
    return [f"{base[i % period]} (event {i})." for i in range(n)]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def node_vectors(
    embedder, texts: list[str], sentence_set: int, cache_dir: str | None
) -> tuple[np.ndarray, float | None]:
    """Vectors of texts (see module docstring); returns (vectors, MiniLM sentences/s or None if cached)."""
    real = len(texts) if sentence_set <= 0 else min(sentence_set, len(texts))
    folder = os.path.expanduser(cache_dir) if cache_dir else None
    if folder:
        os.makedirs(folder, exist_ok=True)
    parts, embedded, seconds = [], 0, 0.0
    for offset in range(0, real, CACHE_CHUNK):  # chunk files: an interrupted run resumes, S can grow
        chunk = texts[offset : min(real, offset + CACHE_CHUNK)]
        key = hashlib.sha256(("\n".join(chunk) + "\n" + embedder.model_path).encode()).hexdigest()[:20]
        path = os.path.join(folder, f"bench_chunk_{key}.npy") if folder else None
        if path and os.path.isfile(path):
            parts.append(np.load(path))
            continue
        start = time.perf_counter()
        parts.append(embedder.embed_batch(chunk))
        seconds += time.perf_counter() - start
        embedded += len(chunk)
        if path:
            np.save(path + ".tmp.npy", parts[-1])
            os.replace(path + ".tmp.npy", path)
        print(f"embedded {offset + len(chunk)}/{real} ({embedded / seconds:.0f}/s)", file=sys.stderr, flush=True)
    base = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), dtype=np.float32)
    rate = embedded / seconds if embedded else None
    out = np.empty((len(texts), base.shape[1]), dtype=np.float32)
    out[:real] = base
    rng = np.random.default_rng(12345)
    for offset in range(real, len(texts), 65536):
        rows = np.arange(offset, min(len(texts), offset + 65536))
        block = base[rows % real] + rng.normal(0.0, JITTER_SIGMA, (len(rows), base.shape[1])).astype(np.float32)
        out[rows] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out, rate


def ingest(
    memory: Memory,
    texts: list[str],
    per_clip: int,
    people: int,
    vectors: np.ndarray | None = None,
    mode: str = "clip",
    batch: int = 20000,
) -> float:
    """Store texts as episodic memories, per_clip per clip; returns nodes per second (vectors given)."""
    graph = memory.graph
    if vectors is None:
        vectors = memory.embedder.embed_batch(texts)
    start = time.perf_counter()
    base = memory.next_clip_index
    clips = []
    for c, offset in enumerate(range(0, len(texts), per_clip)):
        t0 = (base + c) * 30 * NS
        drafts = [
            MemoryDraft(KIND_EPISODIC, text, t0 + i * NS // 10, t0 + i * NS // 10)
            for i, text in enumerate(texts[offset : offset + per_clip])
        ]
        clip = ClipEvidence(base + c, t0, t0 + 30 * NS)
        clip.path = clip_path(base + c, t0)  # the robot walks: every memory gets a place
        clips.append((clip, drafts, offset))
    done = 0
    c = 0
    while c < len(clips):
        clip, drafts, offset = clips[c]
        if mode == "clip" or (c == 0 and not graph.entities):  # the first clip creates the voices
            with graph.ingest_lock:
                new = [f"voice_{p + 1}" for p in range(people)] if not graph.entities else []
                mapped = graph.predict_new_ids(new)
                graph.apply_clip(
                    clip, dict(mapped), MemorizerOutput(drafts), vectors[offset : offset + len(drafts)], new
                )
            c += 1
            done += len(drafts)
        else:
            group = []
            while c < len(clips) and (not group or sum(len(d) for _, d in group) + len(clips[c][1]) <= batch):
                group.append(clips[c][:2])
                c += 1
            first = clips[c - len(group)][2]
            count = sum(len(d) for _, d in group)
            memory.ingest_bulk(group, vectors[first : first + count])
            done += count
        if mode == "bulk" or c % 20 == 0 or c == len(clips):
            elapsed = time.perf_counter() - start
            print(f"ingested {done}/{len(texts)} ({done / elapsed:.0f}/s)", file=sys.stderr, flush=True)
    return len(texts) / (time.perf_counter() - start)


def service_client(path: str) -> int:
    """Run in a separate process: time search_node calls over DDS; prints {"latencies_ms": {...}}."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from m3_interfaces.srv import SearchNode

    with open(path, encoding="utf-8") as handle:
        sets = json.load(handle)
    rclpy.init()
    node = Node("memory_bench_client")
    client = node.create_client(SearchNode, "/m3/memory/search_node")
    executor = SingleThreadedExecutor()  # one executor for all calls (not one per call)
    executor.add_node(node)
    out: dict[str, list[float]] = {}
    try:
        if not client.wait_for_service(timeout_sec=60.0):
            raise RuntimeError("search_node service did not appear")
        for name, queries in sets.items():
            out[name] = []
            for query in queries:
                begin = time.perf_counter()
                future = client.call_async(SearchNode.Request(query=query, top_k=10))
                executor.spin_until_future_complete(future, timeout_sec=60.0)
                if not future.done() or future.result().error_code != 0:
                    raise RuntimeError(f"search_node failed for {query!r}")
                out[name].append((time.perf_counter() - begin) * 1000.0)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    print(json.dumps({"latencies_ms": out}), flush=True)
    return 0


def service_latencies(parameters: dict, embedder, sets: dict[str, list[str]]) -> dict[str, list[float]]:
    """search_node through the real service: the node in this process, the client in another."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.parameter import Parameter

    from m3_memory.memory_node import MemoryNode
    from m3_runtime.managed_node import bring_up

    rclpy.init()
    overrides = [Parameter(name, value=value) for name, value in parameters.items()]
    node = bring_up(MemoryNode(embedder=embedder, parameter_overrides=overrides))
    server = MultiThreadedExecutor()
    server.add_node(node)
    thread = threading.Thread(target=server.spin, daemon=True)
    thread.start()
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(sets, handle)
        result = subprocess.run(
            [sys.executable, "-m", "m3_agent.bench.memory", "--service-client", handle.name],
            capture_output=True,
            text=True,
            timeout=600,
        )
        os.unlink(handle.name)
        if result.returncode != 0:
            raise RuntimeError(f"service client failed: {result.stderr[-2000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])["latencies_ms"]
    finally:
        server.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="m3 bench memory", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10000, help="memories to ingest (default 10000)")
    parser.add_argument("--queries", type=int, default=200, help="search queries to time (default 200)")
    parser.add_argument("--per-clip", type=int, default=50, help="memories per clip (default 50)")
    parser.add_argument("--memory-dir", help="memory directory (default: a new temporary one)")
    parser.add_argument("--no-service", action="store_true", help="skip the DDS service measurement")
    parser.add_argument("--ingest", choices=("bulk", "clip"), default="bulk", help="ingest path (default bulk)")
    parser.add_argument("--batch", type=int, default=20000, help="memories per bulk transaction (default 20000)")
    parser.add_argument(
        "--sentence-set",
        type=int,
        help="texts embedded with MiniLM; 0 = all (default: max(10000, nodes / 10), so no sentence repeats more "
        "than 10 times beyond the first 100,000 nodes)",
    )
    parser.add_argument(
        "--embedding-cache",
        default=DEFAULT_EMBEDDING_CACHE,
        help=f"directory to keep the sentence-set embeddings in (default {DEFAULT_EMBEDDING_CACHE}; '' = none)",
    )
    parser.add_argument("--hnsw-m", type=int, help=f"text index M (default {ann_index.HNSW_M})")
    parser.add_argument(
        "--hnsw-ef-construction", type=int, help=f"ef_construction (default {ann_index.HNSW_EF_CONSTRUCTION})"
    )
    parser.add_argument("--hnsw-ef", type=int, help=f"text index search ef (default {ann_index.HNSW_EF})")
    parser.add_argument("--backend", choices=("sqlite", "milvus"), default="sqlite", help="storage (default sqlite)")
    parser.add_argument("--milvus-uri", default="", help="--backend milvus: a server (default: a milvus-lite here)")
    parser.add_argument(
        "--milvus-search-params", default='{"ef": 128}', help="--backend milvus: the node's milvus_search_params (JSON)"
    )
    parser.add_argument("--service-client", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.service_client:
        return service_client(args.service_client)
    if args.nodes < 0 or args.queries < 1 or args.per_clip < 1 or args.batch < 1:
        parser.error("--queries, --per-clip and --batch must be >= 1, --nodes >= 0")
    if args.nodes == 0 and not args.memory_dir:
        parser.error("--nodes 0 (measure only) needs --memory-dir")
    for name, value in (("HNSW_M", args.hnsw_m), ("HNSW_EF_CONSTRUCTION", args.hnsw_ef_construction),
                        ("HNSW_EF", args.hnsw_ef)):  # fmt: skip
        if value is not None:
            if value < 1:
                parser.error("HNSW parameters must be >= 1")
            setattr(ann_index, name, value)
    tmp = None
    memory_dir = args.memory_dir
    if not memory_dir:
        tmp = tempfile.TemporaryDirectory(prefix="m3_bench_memory_")
        memory_dir = tmp.name
    people = 40
    where = BenchBackend(args.backend, memory_dir, args.milvus_uri, args.milvus_search_params)
    memory = where.open()
    embedder = memory.embedder
    before = len(memory.graph.text)
    if args.sentence_set is None:
        args.sentence_set = max(10000, -(-args.nodes // 10))
    texts = synthetic_texts(args.nodes, people, args.sentence_set)
    if before:  # adding to an existing memory: new event numbers keep the texts distinct
        texts = [t.replace(f"(event {i})", f"(event {before + i})") for i, t in enumerate(texts)]
    rate = embed_rate = None
    if texts:
        vectors, embed_rate = node_vectors(embedder, texts, args.sentence_set, args.embedding_cache)
        rate = ingest(memory, texts, args.per_clip, people, vectors, args.ingest, args.batch)
        del vectors
    rng = np.random.default_rng(0)
    queries = []
    for i in range(args.queries):  # distinct texts, never embedded before: the cold figures are honest
        who, obj = rng.integers(1, people + 1), OBJECTS[rng.integers(len(OBJECTS))]
        queries.append(f"where did <voice_{who}> {VERBS[i % len(VERBS)]} the {obj}? (query {i})")
    embed_ms, cold_ms, warm_ms = [], [], []
    for query in queries:
        begin = time.perf_counter()
        memory.search.search_node(query, top_k=10)  # first time: embeds the query (cold)
        cold_ms.append((time.perf_counter() - begin) * 1000.0)
    for i, query in enumerate(queries):  # fresh texts of the same shape: the embedding alone
        variants = memory.search.query_variants(query + f" (timing {i})")
        begin = time.perf_counter()
        embedder.embed(variants)
        embed_ms.append((time.perf_counter() - begin) * 1000.0)
    for query in queries:
        begin = time.perf_counter()
        memory.search.search_node(query, top_k=10)  # repeated query: embedding from the LRU cache
        warm_ms.append((time.perf_counter() - begin) * 1000.0)
    recall, recall_eps = recall_at_10(memory, embedder.embed(queries[: min(100, len(queries))]))
    windows = window_figures(memory, queries[: min(100, len(queries))])
    if args.backend == "milvus":  # the same windows filtered in Milvus, as a fleet search reads other robots'
        windows.update(window_figures(memory, queries[: min(100, len(queries))], in_milvus=True))
    where.settle(memory)
    nodes = len(memory.graph.text)
    memory.close()  # saves the text index
    del memory
    disk = where.disk_bytes()
    begin = time.perf_counter()
    reopened = where.open(embedder=embedder)
    open_s = time.perf_counter() - begin
    loaded = reopened.graph.text_index_loaded
    where.release(reopened)  # not close(): the saved index is current
    del reopened
    service: dict[str, list[float]] = {}
    if not args.no_service:
        service = service_latencies(
            where.node_parameters(), embedder, {"warm": queries[:100], "cold": [q + " again" for q in queries[:100]]}
        )

    embedding = None
    if texts:
        embedding = "minilm" if 0 < len(texts) <= args.sentence_set or args.sentence_set <= 0 else "sentence_set"
        embedding += "" if embedding == "minilm" else f":{args.sentence_set}"

    def figure(values, q):
        return round(percentile(values, q), 3) if values else None

    result = {
        "nodes": nodes,
        "nodes_added": nodes - before,
        "embedding": embedding,
        "embed_nodes_per_s": None if embed_rate is None else round(embed_rate, 1),
        "ingest_mode": args.ingest,
        "ingest_nodes_per_s": None if rate is None else round(rate, 1),
        "embed_p50_ms": figure(embed_ms, 50),
        "embed_p99_ms": figure(embed_ms, 99),
        "search_p50_ms": figure(warm_ms, 50),
        "search_p99_ms": figure(warm_ms, 99),
        "search_cold_p99_ms": figure(cold_ms, 99),
        "service_p50_ms": figure(service.get("warm"), 50),
        "service_p99_ms": figure(service.get("warm"), 99),
        "service_cold_p99_ms": figure(service.get("cold"), 99),
        "recall_at_10": round(recall, 4),
        "recall_at_10_eps": round(recall_eps, 4),
        **windows,
        "hnsw": {"M": ann_index.HNSW_M, "ef_construction": ann_index.HNSW_EF_CONSTRUCTION, "ef": ann_index.HNSW_EF},
        "open_s": round(open_s, 2),
        "index_loaded_on_open": loaded,
        "disk_bytes_per_node": round(disk / max(nodes, 1), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load": os.getloadavg()[0],
        "memory_dir": os.path.abspath(memory_dir) if args.memory_dir else None,
        "backend": args.backend,
    }
    where.close()
    print(json.dumps(result), flush=True)
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
