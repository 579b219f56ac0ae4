"""How well `m3 bench memory` finds: the text index's recall against exact search, and the timing and recall of
search_node with a time window and with a radius filter (the robot's path through each bench clip).

The robot walks a random path through a square of AREA_M metres, one leg per clip. A time window covers
TIME_SHARE of the memory's time span at a random start; a place filter is a circle of RADIUS_M around a random
point on the robot's path. Recall@10 is measured against the exact filtered top-10: cosine over every memory
the same filter keeps (graph/columns.py and search/where.py decide which, the same rules as the search).
"""

from __future__ import annotations

import time

import numpy as np

from m3_memory.memory import Memory
from m3_memory.place.poses import PoseSample

NS = 1_000_000_000
AREA_M = 50.0  # the robot's world: a square of this side [m]
STEP_M = 3.0  # how far it walks during one 30 s clip [m]
RADIUS_M = 3.0  # place searches: memories within this distance of a point [m]
TIME_SHARE = 0.01  # time searches: a window of this share of the memory's time span


def clip_path(clip_index: int, t0: int, seconds: int = 30) -> list[PoseSample]:
    """The robot's leg during one clip: a straight walk from a point fixed by the clip index, 5 poses."""
    rng = np.random.default_rng(clip_index)
    x, y = rng.uniform(0, AREA_M, 2)
    heading = rng.uniform(-np.pi, np.pi)
    return [
        PoseSample(
            t0 + i * seconds * NS // 4, float(x + STEP_M * i / 4 * np.cos(heading)),
            float(y + STEP_M * i / 4 * np.sin(heading)), float(heading),
        )
        for i in range(5)
    ]  # fmt: skip


def recall_at_10(memory: Memory, queries: np.ndarray) -> tuple[float, float]:
    """hnswlib's top-10 against exact cosine top-10 over the same stored vectors: (share of the exact
    top-10 ids found, share of found ids whose cosine is within 0.001 of the exact 10th: ann-benchmarks'
    recall, which does not count a miss among near-ties)."""
    index = memory.graph.text_index
    seqs = np.asarray(sorted(memory.graph.text_by_seq), dtype=np.int64)
    scores = np.full((len(queries), len(seqs)), -2.0, dtype=np.float32)
    for offset in range(0, len(seqs), 100_000):
        chunk = seqs[offset : offset + 100_000]
        scores[:, offset : offset + len(chunk)] = queries @ index.vectors(chunk.tolist()).T
    found = close = 0
    column = {int(seq): i for i, seq in enumerate(seqs)}
    for row, query in enumerate(queries):
        top = np.argpartition(-scores[row], min(10, len(seqs) - 1))[:10]
        exact = {int(seqs[i]) for i in top}
        tenth = float(np.min(scores[row][top]))
        approx = {label for label, _ in index.search(query, 10)}
        found += len(exact & approx)
        close += sum(1 for label in approx if scores[row][column[label]] >= tenth - 1e-3)
    return found / (10 * len(queries)), close / (10 * len(queries))


def _exact_top10(memory: Memory, vectors: np.ndarray, where, before_ns: int = 0) -> set[str]:
    """The exact filtered top-10: every memory in the window, by its best cosine over the query's variants."""
    graph = memory.graph
    seqs = graph.columns.window(where.after_ns, before_ns, where.box(), where.frame_id)
    nodes = [graph.text[graph.text_by_seq[int(s)]] for s in seqs]
    nodes = [n for n in nodes if where.keeps(n)]
    if not nodes:
        return set()
    scores = (graph.text_index.vectors([n.seq for n in nodes]) @ vectors.T).max(axis=1)
    return {nodes[i].node_id for i in np.argsort(-scores, kind="stable")[:10]}


def _searched_in_milvus(memory: Memory):
    """A search of this robot's episodic memories in Milvus with its scalar filters, as a fleet search reads
    other robots' memories (search/fleet.py: the filter, then the exact shape on the hits)."""
    from m3_memory.milvus.fleet import FleetReader
    from m3_memory.milvus.writer import place_of_row
    from m3_memory.search.fleet import PLACE_OVERFETCH, milvus_filter

    backend = memory.graph.backend
    reader = FleetReader(backend)
    own = f'robot_id == "{backend.robot_id}"'

    def search(query: str, vectors: np.ndarray, where, before_ns: int) -> set[str]:
        expr = milvus_filter(own, ["episodic"], where, stamp_ns=before_ns)
        best: dict[str, float] = {}
        for rows in reader.nearest(vectors, 10 * (PLACE_OVERFETCH if where.has_place else 1), expr, narrow=True):
            for row in rows:
                if where.keeps_place(place_of_row(row)):
                    best[row["node_id"]] = max(best.get(row["node_id"], -2.0), row["score"])
        return set(sorted(best, key=lambda n: -best[n])[:10])

    return search


def window_figures(memory: Memory, queries: list[str], seed: int = 1, in_milvus: bool = False) -> dict:
    """search_time_p99_ms / search_place_p99_ms (warm query embeddings) and their recall@10 against exact
    filtered search; None when the memory has no places or no time span. in_milvus: the same windows searched
    in Milvus (milvus_search_*: the filtered vector search of a fleet search) instead of search_node."""
    graph, search = memory.graph, memory.search
    prefix = "milvus_search" if in_milvus else "search"
    rng = np.random.default_rng(seed)
    cols = graph.columns
    placed = np.flatnonzero(~np.isnan(cols.x))
    if len(cols.seq) == 0 or len(placed) == 0:
        return {f"{prefix}_time_p99_ms": None, f"{prefix}_place_p99_ms": None}
    if in_milvus:
        searched = _searched_in_milvus(memory)
    else:

        def searched(query: str, vectors: np.ndarray, where, before_ns: int) -> set[str]:
            hits = search.search_node(query, kinds=["episodic"], top_k=10, before_stamp_ns=before_ns, where=where)
            return {h.node_id for h in hits}

    first, last = int(cols.start_ns.min()), int(cols.end_ns.max())
    span = max(1, int((last - first) * TIME_SHARE))
    out: dict = {}
    for kind in ("time", "place"):
        times, found, total = [], 0, 0
        for query in queries:
            if kind == "time":
                start = int(rng.integers(first, max(first + 1, last - span)))
                where = search.where(after_ns=start)
                before = start + span
            else:
                row = placed[int(rng.integers(len(placed)))]
                where = search.where(x=float(cols.x[row]), y=float(cols.y[row]), radius_m=RADIUS_M)
                before = 0
            vectors = memory.embedder.embed(search.query_variants(query))  # warm: embedding is not what is timed
            begin = time.perf_counter()
            ids = searched(query, vectors, where, before)
            times.append((time.perf_counter() - begin) * 1000.0)
            exact = _exact_top10(memory, vectors, where, before)
            found += len(exact & ids)
            total += len(exact)
        # The first search after the memory opened pays one-off costs (pages and caches touched for the
        # first time; up to 20 ms at 1M memories): reported on its own, not in the steady state's tail.
        out[f"{prefix}_{kind}_first_ms"] = round(times[0], 3)
        times = sorted(times[1:] or times)
        out[f"{prefix}_{kind}_p50_ms"] = round(times[len(times) // 2], 3)
        out[f"{prefix}_{kind}_p99_ms"] = round(times[min(len(times) - 1, int(0.99 * len(times)))], 3)
        out[f"{prefix.replace('search', 'recall_at_10')}_{kind}"] = round(found / total, 4) if total else None
    return out
