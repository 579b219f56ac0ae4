"""CosineIndex: exact scan while small, HNSW above; its unit-vector copies (per-memory scores) agree
with hnswlib's own, across replacement, growth and a save/load round trip."""

from __future__ import annotations

import numpy as np
import pytest

from m3_memory.store import ann_index
from m3_memory.store.ann_index import EXACT_MAX, CosineIndex

DIM = 24


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_small_index_scans_exactly_and_filters():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(50, DIM)).astype(np.float32) * 3.0  # not unit: the index normalises
    labels = list(range(100, 150))
    index = CosineIndex(DIM, capacity=8)  # grows past its first capacity
    index.add(labels, vectors)
    query = vectors[10] + 0.1 * rng.normal(size=DIM).astype(np.float32)
    got = index.search(query, 5, keep=lambda label: label % 2 == 0)
    scores = unit(vectors) @ (query / np.linalg.norm(query))
    want = [labels[i] for i in np.argsort(-scores) if labels[i] % 2 == 0][:5]
    assert [label for label, _ in got] == want
    assert got[0][1] == pytest.approx(float(scores[labels.index(want[0])]), abs=1e-5)


def test_unit_copies_match_hnswlib_and_follow_replacement(tmp_path):
    rng = np.random.default_rng(4)
    n = EXACT_MAX + 300
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    labels = [2 * i + 1 for i in range(n)]  # sparse labels
    index = CosineIndex(DIM, capacity=64)
    index.add(labels[: n // 2], vectors[: n // 2])
    index.add(labels[n // 2 :], vectors[n // 2 :])
    picked = [labels[0], labels[n - 1], labels[n // 2], labels[7]]
    hnsw_rows = np.asarray(index._hnsw.get_items(picked), dtype=np.float32)
    np.testing.assert_allclose(index.vectors(picked), hnsw_rows, atol=1e-6)
    np.testing.assert_allclose(index.vector(labels[7]), unit(vectors[7:8])[0], atol=1e-6)
    assert index.vector(0) is None and 0 not in index and labels[3] in index

    replacement = rng.normal(size=(1, DIM)).astype(np.float32)
    index.add([labels[7]], replacement)  # same label: replaced, not added
    assert len(index) == n
    np.testing.assert_allclose(index.vector(labels[7]), unit(replacement)[0], atol=1e-6)
    assert index.search(replacement[0], 1)[0][0] == labels[7]

    path = str(tmp_path / "index.hnsw")
    index.save(path)
    stored = np.stack([index.vector(label) for label in labels])
    loaded = CosineIndex.load(path, DIM, labels, stored)
    np.testing.assert_allclose(loaded.vectors(picked), index.vectors(picked), atol=1e-7)
    query = vectors[100]
    assert loaded.search(query, 10) == index.search(query, 10)
    with pytest.raises(ValueError, match="holds"):
        CosineIndex.load(path, DIM, labels[:-1], stored[:-1])


@pytest.mark.parametrize("labels", [[5, 6, 7, 8], [9, 2, 4], [1, 1800], [1800, 1], list(range(1800, 0, -3))])
def test_cosines_are_the_stored_vectors_times_the_queries(labels, monkeypatch):
    """Rows close together (views), scattered (gathered block by block): blocks of 64 rows here."""
    monkeypatch.setattr(ann_index, "SINGLE_THREAD_MACS", 64 * 8 * 3)
    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(1800, 8)).astype(np.float32)
    index = CosineIndex(8, capacity=16)  # grows
    index.add(list(range(1, 1801)), vectors)
    queries = unit(rng.normal(size=(3, 8)).astype(np.float32))
    want = unit(vectors[np.asarray(labels) - 1]) @ queries.T
    assert np.allclose(index.cosines(np.asarray(labels), queries), want, atol=1e-6)
    assert np.allclose(index.vectors(labels), unit(vectors[np.asarray(labels) - 1]), atol=1e-6)
    assert index.cosines(np.asarray([], dtype=np.int64), queries).shape == (0, 3)
    for missing in ([1801], [0], [-3], [3, 10**6]):
        with pytest.raises(KeyError):
            index.cosines(np.asarray(missing), queries)


def low_rank(rng, n: int, dim: int = DIM, rank: int = 4, noise: float = 0.05) -> np.ndarray:
    """Vectors near a few main axes, as sentence embeddings are (most of their energy in few directions)."""
    return (rng.normal(size=(n, rank)) @ rng.normal(size=(rank, dim)) + noise * rng.normal(size=(n, dim))).astype(
        np.float32
    )


@pytest.fixture
def sketched(monkeypatch):
    """A sketch from 300 vectors on, of 4 axes (the module's defaults: 50,000 and 64)."""
    monkeypatch.setattr(ann_index, "SKETCH_MIN_ROWS", 300)
    monkeypatch.setattr(ann_index, "SKETCH_DIM", 4)


def test_a_small_index_scores_every_label_exactly():
    rng = np.random.default_rng(5)
    index = CosineIndex(DIM, capacity=16)
    index.add(list(range(1, 501)), low_rank(rng, 500))
    labels = np.arange(1, 501)
    queries = unit(rng.normal(size=(2, DIM)).astype(np.float32))
    positions, scores = index.best_cosines(labels, queries, 10)
    assert positions.tolist() == list(range(500))
    np.testing.assert_allclose(scores, index.cosines(labels, queries), atol=1e-6)


def test_the_sketch_ranks_a_large_window_and_its_best_are_scored_exactly(sketched, tmp_path):
    rng = np.random.default_rng(6)
    vectors = low_rank(rng, 1200)
    labels = list(range(1, 1201))
    index = CosineIndex(DIM, capacity=16)
    index.add(labels[:200], vectors[:200])  # no sketch yet; fitted at 300, again at 600
    for start in range(200, 1200, 100):
        index.add(labels[start : start + 100], vectors[start : start + 100])
    window = np.arange(1, 1201, 2)  # 600 scattered labels
    queries = unit(vectors[[10, 700]] + 0.01 * rng.normal(size=(2, DIM)).astype(np.float32))
    positions, scores = index.best_cosines(window, queries, 20)
    assert 20 <= len(positions) <= 40  # the 20 best of each query, some shared
    np.testing.assert_allclose(scores, index.cosines(window[positions], queries), atol=1e-6)
    exact = index.cosines(window, queries)
    for q in range(2):
        top5 = set(np.argsort(-exact[:, q])[:5].tolist())
        assert top5 <= set(positions.tolist())  # the sketch keeps the exact best
    replaced = unit(queries[:1] * -1.0)  # a label replaced after the fit: its sketch row follows
    index.add([11], replaced)
    positions, scores = index.best_cosines(window, -queries[:1], 20)
    assert window[positions[np.argmax(scores[:, 0])]] == 11

    path = str(tmp_path / "index.hnsw")
    index.save(path)
    loaded = CosineIndex.load(path, DIM, labels, np.stack([index.vector(label) for label in labels]))
    got = loaded.best_cosines(window, queries, 20)
    again = index.best_cosines(window, queries, 20)
    assert got[0].tolist() == again[0].tolist()
    np.testing.assert_allclose(got[1], again[1], atol=1e-6)
