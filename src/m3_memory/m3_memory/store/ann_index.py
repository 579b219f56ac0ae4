"""Cosine ANN index over unit vectors: hnswlib 0.8.0, with exact search for tiny sizes.

The index is rebuilt from the store when the memory opens (the store is the only source of truth,
so an index can never disagree with it after a crash). Below EXACT_MAX vectors an exact numpy scan
is used instead of HNSW: it is as fast there and gives exact results for tiny memories. A large index
also keeps a sketch (each vector on the stored vectors' main axes) to rank the memories of a time or place
window before their best are scored exactly (best_cosines).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import hnswlib
import numpy as np

EXACT_MAX = 256  # exact-search fallback only while the index holds at most this many vectors
# HNSW parameters, chosen with `m3 bench memory` (recall@10 against exact search; README figures)
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 400
HNSW_EF = 128
SINGLE_THREAD_MACS = 65_536  # multiply-adds of one block of a product (_products): OpenBLAS keeps it on one thread
# The sketch: every vector's projection on the stored vectors' SKETCH_DIM main axes, for ranking a large window
# before its best are scored exactly (best_cosines; README "Time and place searches" has the figures).
SKETCH_DIM = 64
SKETCH_MIN_ROWS = 50_000  # an index this large keeps a sketch (a smaller one scans its windows quickly enough)
SKETCH_SAMPLE = 20_000  # vectors the axes are fitted on (evenly spread over the rows)


def _normalise_rows(rows: np.ndarray) -> None:
    """Scale each row to unit length, in place (zero rows stay zero)."""
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    rows /= np.maximum(norms, 1e-12)[:, None]


def _products(matrix: np.ndarray, rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """matrix[rows] @ queries.T, a block at a time. Rows that lie close together (memories of one time span,
    stored in time order) are read as views of the matrix, not a gathered copy: at 1M memories a window's copy
    alone took longer than the product; scattered rows are gathered a block at a time. Each block is small
    enough for OpenBLAS to keep on one thread (SINGLE_THREAD_MACS): split over both of 2 cores, a product waited
    for the core a busy process held (with a busy loop beside it, 37 ms once in 300 products of 11,000 rows, the
    same in blocks at most 0.4 ms)."""
    if len(rows) == 0:
        return np.empty((0, len(queries)), dtype=np.float32)
    step = max(16, SINGLE_THREAD_MACS // (matrix.shape[1] * max(1, len(queries))))
    low, high = int(rows.min()), int(rows.max()) + 1
    if high - low <= 2 * len(rows):
        span = np.empty((high - low, len(queries)), dtype=np.float32)
        for i in range(low, high, step):
            span[i - low : i - low + step] = matrix[i : min(i + step, high)] @ queries.T
        return span[rows - low]
    out = np.empty((len(rows), len(queries)), dtype=np.float32)
    for i in range(0, len(rows), step):
        out[i : i + step] = matrix[rows[i : i + step]] @ queries.T
    return out


class CosineIndex:
    """Label → unit vector, with filtered top-k by cosine similarity; thread-safe."""

    def __init__(
        self,
        dim: int,
        capacity: int = 1024,
        m: int | None = None,
        ef_construction: int | None = None,
        ef: int | None = None,
    ) -> None:
        """m, ef_construction, ef: None = the module's HNSW_* values (read at call time)."""
        m = HNSW_M if m is None else m
        ef_construction = HNSW_EF_CONSTRUCTION if ef_construction is None else ef_construction
        ef = HNSW_EF if ef is None else ef
        self.dim = dim
        self._m, self._efc, self._ef = m, ef_construction, ef
        self._hnsw = hnswlib.Index(space="cosine", dim=dim)
        self._hnsw.init_index(max_elements=max(capacity, 16), ef_construction=ef_construction, M=m)
        self._hnsw.set_ef(ef)
        # Unit copies of the vectors, by row: per-memory scores read them (hnswlib's get_items
        # builds Python floats, about 18 us per vector) and so does the exact scan while small.
        self._rows: dict[int, int] = {}  # label -> row of _unit, in row order (insertion order)
        self._row_of = np.full(max(capacity, 16), -1, dtype=np.int64)  # the same map as an array: label -> row
        self._unit = np.zeros((max(capacity, 16), dim), dtype=np.float32)
        self._basis: np.ndarray | None = None  # (dim, SKETCH_DIM): the sketch's axes, once fitted
        self._sketch = np.zeros((0, SKETCH_DIM), dtype=np.float32)  # rows of _unit projected on _basis
        self._fitted_rows = 0  # rows when _basis was fitted; fitted again when they double
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, labels: list[int], vectors: np.ndarray) -> None:
        """Add or replace vectors (replacing keeps one vector per label, e.g. an entity's centroid)."""
        if len(labels) == 0:
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(labels), self.dim)
        with self._lock:
            needed = len(self._rows) + len(labels)
            if needed > self._hnsw.get_max_elements():
                self._hnsw.resize_index(max(needed, 2 * self._hnsw.get_max_elements()))
            self._hnsw.add_items(vectors, np.asarray(labels, dtype=np.int64), replace_deleted=False)
            self._store_unit(labels, vectors)

    def _store_unit(self, labels: list[int], vectors: np.ndarray) -> None:
        """Unit copies of vectors in the rows of labels; new labels take the next rows, in order."""
        start = len(self._rows)
        rows = [self._rows.setdefault(int(label), len(self._rows)) for label in labels]
        top = max(int(label) for label in labels)
        if top >= len(self._row_of):
            grown = np.full(max(top + 1, 2 * len(self._row_of)), -1, dtype=np.int64)
            grown[: len(self._row_of)] = self._row_of
            self._row_of = grown
        self._row_of[np.asarray(labels, dtype=np.int64)] = rows
        if len(self._rows) > len(self._unit):
            grown = np.zeros((max(len(self._rows), 2 * len(self._unit)), self.dim), dtype=np.float32)
            grown[:start] = self._unit[:start]
            self._unit = grown
        if len(self._rows) - start == len(labels):  # all new and distinct: one block, no per-row work
            block = self._unit[start : len(self._rows)]
            if block.ctypes.data != vectors.ctypes.data:  # else already in place (load's adopted block)
                block[:] = vectors
            _normalise_rows(block)
            changed = np.arange(start, len(self._rows))
        else:
            unit = np.array(vectors, dtype=np.float32)
            _normalise_rows(unit)
            self._unit[rows] = unit
            changed = np.asarray(rows, dtype=np.int64)
        self._update_sketch(changed)

    def _update_sketch(self, changed: np.ndarray) -> None:
        """Fit the sketch's axes once the index holds SKETCH_MIN_ROWS vectors, again each time it has doubled
        since (the axes follow what memory holds), and project the changed rows otherwise; lock held."""
        n = len(self._rows)
        if n < SKETCH_MIN_ROWS or self.dim < 2 * SKETCH_DIM:
            return
        if self._basis is None or n >= 2 * self._fitted_rows:
            sample = self._unit[np.linspace(0, n - 1, min(n, SKETCH_SAMPLE)).astype(np.int64)]
            values, axes = np.linalg.eigh(sample.T @ sample)  # the uncentred second moment: dot products kept best
            self._basis = np.ascontiguousarray(axes[:, np.argsort(-values)[:SKETCH_DIM]], dtype=np.float32)
            self._fitted_rows = n
            self._sketch = np.zeros((len(self._unit), SKETCH_DIM), dtype=np.float32)
            self._sketch[:n] = self._unit[:n] @ self._basis
            return
        if len(self._sketch) < len(self._unit):
            grown = np.zeros((len(self._unit), SKETCH_DIM), dtype=np.float32)
            grown[: len(self._sketch)] = self._sketch
            self._sketch = grown
        self._sketch[changed] = self._unit[changed] @ self._basis

    def search(self, query: np.ndarray, k: int, keep: Callable[[int], bool] | None = None) -> list[tuple[int, float]]:
        """Top-k (label, cosine) best first among labels that `keep` accepts."""
        query = np.asarray(query, dtype=np.float32).reshape(self.dim)
        with self._lock:
            n = len(self._rows)
            if n == 0 or k <= 0:
                return []
            if n <= EXACT_MAX:
                scores = self._unit[:n] @ (query / max(float(np.linalg.norm(query)), 1e-12))
                order = np.argsort(-scores, kind="stable")
                row_labels = list(self._rows)
                out = []
                for i in order:
                    if keep is None or keep(row_labels[i]):
                        out.append((row_labels[i], float(scores[i])))
                        if len(out) == k:
                            break
                return out
            fetch = min(n, max(k + k // 4, 32))  # a little over k for the filter; the loop below fetches more
            while True:
                found, distances = self._knn(query, fetch, n)
                out = [
                    (int(label), float(1.0 - dist))
                    for label, dist in zip(found[0], distances[0], strict=True)
                    if keep is None or keep(int(label))
                ]
                if len(out) >= k or fetch >= n:
                    return out[:k]
                fetch = min(n, fetch * 4)

    def _knn(self, query: np.ndarray, fetch: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """hnswlib's knn_query, robust to its "Cannot return the results" error: when a search
        reaches fewer than `fetch` vectors (an HNSW graph over many near-duplicates, e.g. repeated
        episodic texts, can strand the search in a small cluster), retry with a larger ef, and
        finally return what the search reaches."""
        ef = max(self._ef, fetch)
        while True:
            self._hnsw.set_ef(ef)
            try:
                return self._hnsw.knn_query(query, k=fetch, num_threads=1)
            except RuntimeError:
                if ef < n:
                    ef = min(n, ef * 4)
                elif fetch > 1:
                    fetch //= 2
                else:
                    return np.zeros((1, 0), dtype=np.uint64), np.zeros((1, 0), dtype=np.float32)

    def save(self, path: str) -> None:
        """Write the HNSW graph (only meaningful above EXACT_MAX; the caller records what it matches)."""
        with self._lock:
            self._hnsw.save_index(path)

    @classmethod
    def load(cls, path: str, dim: int, labels: list[int], vectors: np.ndarray, ef: int | None = None) -> CosineIndex:
        """An index saved by save(), holding exactly `labels`, whose vectors are the first len(labels)
        rows of `vectors` (the caller has checked that; the store gives them, hnswlib's own copy is slow
        to read). A writable float32 block is adopted, not copied: its further rows are spare capacity."""
        if len(labels) <= EXACT_MAX:
            raise ValueError("small indexes are rebuilt, not loaded")
        ef = HNSW_EF if ef is None else ef
        index = cls(dim, capacity=16, ef=ef)  # its small HNSW graph is replaced right away
        index._hnsw = hnswlib.Index(space="cosine", dim=dim)
        index._hnsw.load_index(path, max_elements=len(labels) + 1024)
        index._hnsw.set_ef(ef)
        if index._hnsw.get_current_count() != len(labels):
            raise ValueError(f"saved index {path} holds {index._hnsw.get_current_count()} vectors, not {len(labels)}")
        if vectors.dtype == np.float32 and vectors.flags.c_contiguous and vectors.flags.writeable:
            index._unit = vectors  # adopted (rows past len(labels) are spare capacity): no second copy
        index._store_unit(labels, vectors[: len(labels)])
        return index

    def vectors(self, labels: list[int]) -> np.ndarray:
        """The stored unit vectors of labels (all must be present), one row each."""
        with self._lock:
            return self._unit[self._rows_of(labels)]

    def cosines(self, labels: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """Cosines (len(labels), len(queries)) of the labels' vectors (all present) with unit queries."""
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        with self._lock:
            return _products(self._unit, self._rows_of(labels), queries)

    def best_cosines(self, labels: np.ndarray, queries: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions in labels, their exact cosines with the unit queries): at least the `count` best labels
        per query. Every label when they are few or the index keeps no sketch; else the `count` best per query
        by the sketch, then scored exactly. Why: at 1M memories a 3 m place window holds about 10,000 of them,
        and reading their full vectors took most of a search; the sketch is a sixth of the bytes."""
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        with self._lock:
            rows = self._rows_of(labels)
            if self._basis is None or len(rows) <= 4 * count:
                return np.arange(len(rows)), _products(self._unit, rows, queries)
            rough = _products(self._sketch, rows, queries @ self._basis)
            best = np.unique(np.concatenate([np.argpartition(-column, count)[:count] for column in rough.T]))
            return best, _products(self._unit, rows[best], queries)

    def _rows_of(self, labels) -> np.ndarray:
        """Rows of labels, all present (else KeyError); call with the lock held."""
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        inside = (labels >= 0) & (labels < len(self._row_of))
        rows = np.where(inside, self._row_of[np.where(inside, labels, 0)], -1)
        if len(rows) and rows.min() < 0:
            raise KeyError(int(labels[np.argmin(rows)]))
        return rows

    def __contains__(self, label: int) -> bool:
        with self._lock:
            return label in self._rows

    def vector(self, label: int) -> np.ndarray | None:
        with self._lock:
            row = self._rows.get(int(label))
            return None if row is None else self._unit[row].copy()
