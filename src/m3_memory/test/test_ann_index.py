"""CosineIndex: exact scan while small, HNSW above; its unit-vector copies (per-memory scores) agree
with hnswlib's own, across replacement, growth and a save/load round trip."""

from __future__ import annotations

import numpy as np
import pytest

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
def test_cosines_are_the_stored_vectors_times_the_queries(labels):
    """Rows close together (a view), scattered (gathered block by block: 600 rows are two blocks)."""
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
