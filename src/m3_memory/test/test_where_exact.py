"""search.where.exact_scores: the k best per query variant among the memories in a window that the caller's
check accepts, equal to scoring every memory and filtering in plain Python - also when the best-scoring
memories fail the check (they are then walked past, not lost)."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest

from m3_memory.graph.columns import TextColumns
from m3_memory.graph.records import Place, TextNode
from m3_memory.search import where as where_module
from m3_memory.search.where import Where, exact_scores
from m3_memory.store import ann_index
from m3_memory.store.ann_index import CosineIndex

DIM = 16


def memory_graph(count: int, seed: int = 11):
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed).normal(size=(count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    columns, index, text, by_seq = TextColumns(), CosineIndex(DIM, capacity=16), {}, {}
    for seq in range(1, count + 1):
        start = (seq // 8) * 1000 + rng.randrange(0, 1000)
        place = None if seq % 9 == 0 else Place("map", rng.uniform(-10, 10), rng.uniform(-10, 10))
        kind = "semantic" if seq % 4 == 0 else "episodic"
        node = TextNode(
            f"{kind}_{seq}", seq, kind, "t", seq // 8, start, start + rng.randrange(0, 400), 1.0, place=place
        )
        columns.add(node)
        text[node.node_id], by_seq[seq] = node, node.node_id
    index.add(list(range(1, count + 1)), vectors)
    return SimpleNamespace(columns=columns, text_index=index, text=text, text_by_seq=by_seq), vectors


def brute_force(graph, vectors, where: Where, before_ns: int, passes, queries, k: int) -> dict[str, float]:
    kept = [
        n for n in graph.text.values() if (before_ns <= 0 or n.start_ns <= before_ns) and where.keeps(n) and passes(n)
    ]
    best: dict[str, float] = {}
    for query in queries:
        scored = sorted(((float(vectors[n.seq - 1] @ query), n.node_id) for n in kept), reverse=True)[:k]
        for score, node_id in scored:
            best[node_id] = max(best.get(node_id, -2.0), score)
    return best


@pytest.mark.parametrize(
    "where, before_ns",
    [
        (Where(after_ns=20_000), 60_000),
        (Where(after_ns=1), 0),
        (Where(point=(2.0, -3.0), radius_m=4.0), 0),
        (Where(after_ns=30_000, point=(-5.0, 5.0), radius_m=7.5), 90_000),
    ],
)
@pytest.mark.parametrize("kinds", [{"episodic", "semantic"}, {"semantic"}])
def test_exact_scores_equal_a_plain_filter(where, before_ns, kinds):
    graph, vectors = memory_graph(2400)
    rng = np.random.default_rng(2)
    queries = rng.normal(size=(3, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    def passes(node: TextNode) -> bool:
        return node.kind in kinds and where.keeps(node) and (before_ns <= 0 or node.start_ns <= before_ns)

    got = exact_scores(graph, where, before_ns, passes, queries, 5)
    want = brute_force(graph, vectors, where, before_ns, lambda n: n.kind in kinds, queries, 5)
    assert got.keys() == want.keys() and want
    assert all(math.isclose(got[i], want[i], abs_tol=1e-5) for i in want)


def test_the_best_failing_the_check_are_walked_past():
    graph, vectors = memory_graph(600)
    query = vectors[100:101]  # memory 101 scores 1.0, its neighbours next
    order = np.argsort(-(vectors @ query[0]))
    refused = {int(i) + 1 for i in order[:50]}  # the 50 best are refused: more than the first 4k looked at
    got = exact_scores(graph, Where(after_ns=1), 0, lambda n: n.seq not in refused, query, 3)
    want = [graph.text_by_seq[int(i) + 1] for i in order[50:53]]
    assert sorted(got) == sorted(want)


def test_a_large_window_ranked_by_the_sketch_falls_back_to_every_memory_when_its_best_fail(monkeypatch):
    """The sketch's 8 best per query scored exactly; when too few of them pass, all of the window is."""
    monkeypatch.setattr(ann_index, "SKETCH_MIN_ROWS", 300)
    monkeypatch.setattr(ann_index, "SKETCH_DIM", 4)
    monkeypatch.setattr(where_module, "RANKED_CANDIDATES", 8)
    graph, vectors = memory_graph(1200)  # built after the patch: its index keeps a sketch
    query = vectors[100:101]
    where = Where(after_ns=1)
    kept = exact_scores(graph, where, 0, lambda n: True, query, 3)
    assert graph.text_by_seq[101] in kept and len(kept) == 3
    order = np.argsort(-(vectors @ query[0]))
    refused = {int(i) + 1 for i in order[:40]}  # more than the sketch's best
    got = exact_scores(graph, where, 0, lambda n: n.seq not in refused, query, 3)
    want = brute_force(graph, vectors, where, 0, lambda n: n.seq not in refused, query, 3)
    assert got.keys() == want.keys()
