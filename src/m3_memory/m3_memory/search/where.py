"""Time and place windows of a search: which memories a search_node / search_clip request may return.

A time window keeps memories that overlap it (ended at or after its start; the as-of `before_stamp` is its end).
A place window keeps memories whose recorded place lies in a named region of the node's regions file, or within
a radius of a point, or both; a memory without a place never passes a place window. A filtered search scores
the memories that pass exactly when few do (a filter rejects most of an HNSW neighbourhood, so the index would
have to be walked far), and asks the index with the filter otherwise; which memories pass the time window and
the place's bounds is one vectorised test (graph/columns.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.records import Place, TextNode
from m3_memory.place.regions import Region, Regions
from m3_memory.search.as_of import AsOfError, check_as_of

EXACT_CANDIDATES = 20000  # at most this many passing memories: score them all (one matrix product)
RANKED_CANDIDATES = 128  # per query variant: a large window's best by the index's sketch, then scored exactly
# A memory made in a region the query names ("in the kitchen") ranks this much higher [cosine]: above one made
# elsewhere that matches about as well, still below a much better match (the words may name a thing, not where).
REGION_BONUS = 0.1


@dataclass(frozen=True)
class Where:
    """A checked time and place window; the default keeps everything."""

    after_ns: int = 0  # keep memories that ended at or after this stream time; 0 = no limit
    region: Region | None = None  # keep memories whose place lies in this region
    point: tuple[float, float] | None = None  # keep memories within radius_m of this point (pose frame)
    radius_m: float = 0.0
    frame_id: str = "map"  # the frame of region and point: places in another frame never pass

    @property
    def has_place(self) -> bool:
        return self.region is not None or self.point is not None

    @property
    def active(self) -> bool:
        return self.after_ns > 0 or self.has_place

    def box(self) -> tuple[float, float, float, float] | None:
        """The bounds (min_x, min_y, max_x, max_y) every place in the window lies in; None without a place filter."""
        boxes = []
        if self.region is not None:
            boxes.append(self.region.bounds())
        if self.point is not None:
            x, y, r = self.point[0], self.point[1], self.radius_m
            boxes.append((x - r, y - r, x + r, y + r))
        if not boxes:
            return None
        return (
            max(b[0] for b in boxes), max(b[1] for b in boxes), min(b[2] for b in boxes), min(b[3] for b in boxes),
        )  # fmt: skip

    def keeps(self, node: TextNode) -> bool:
        """Whether a memory passes the window (as-of and kind filters are the caller's)."""
        if self.after_ns > 0 and node.end_ns < self.after_ns:
            return False
        return self.keeps_place(node.place)

    def keeps_place(self, place: Place | None) -> bool:
        """Whether a place passes the place window (any place, and none, when it has none)."""
        if not self.has_place:
            return True
        if place is None or place.frame_id != self.frame_id:
            return False
        if self.region is not None and not self.region.contains(place.x, place.y):
            return False
        return self.point is None or math.hypot(place.x - self.point[0], place.y - self.point[1]) <= self.radius_m


NOWHERE = Where()


def where_of(regions: Regions, after_ns: int, region: str = "", x: float = 0.0, y: float = 0.0,
             radius_m: float = 0.0) -> Where:  # fmt: skip
    """A request's window, checked: INVALID_ARGUMENT for a negative time, an unknown region, or a radius or
    point that is not a finite non-negative number."""
    try:
        check_as_of(-1, after_ns)
    except AsOfError as error:
        raise MemoryApiError(errors.INVALID_ARGUMENT, f"after_stamp: {error}") from None
    if not all(math.isfinite(v) for v in (x, y, radius_m)) or radius_m < 0:
        raise MemoryApiError(
            errors.INVALID_ARGUMENT, f"place filter: x, y must be finite and radius_m >= 0, got {x}, {y}, {radius_m}"
        )
    found = None
    if region.strip():
        found = regions.get(region)
        if found is None:
            known = ", ".join(repr(r.name) for r in regions) or "none: the memory node has no regions_file"
            raise MemoryApiError(errors.INVALID_ARGUMENT, f"unknown region {region!r}; regions: {known}")
    point = (float(x), float(y)) if radius_m > 0 else None
    return Where(int(after_ns), found, point, float(radius_m), regions.frame_id)


def region_named(regions: Regions, query: str, where: Where) -> Where | None:
    """The window of the first region the query text names ("what was said in the kitchen"), within the
    request's time window; None when it names none, or when the request filters by place itself."""
    if where.has_place or not (found := regions.named_in(query)):
        return None
    return replace(where, region=found[0], frame_id=regions.frame_id)


def exact_scores(graph, where: Where, before_ns: int, passes, vectors: np.ndarray, k: int) -> dict[str, float] | None:
    """node_id -> best cosine over the query variants of the k best memories per variant among those in the
    window that `passes` accepts, scored exactly (one matrix product) when the window and the place's bounds
    hold at most EXACT_CANDIDATES memories; else None (search the index with the filter instead). Of a window
    over 4 x RANKED_CANDIDATES memories in a large index, the RANKED_CANDIDATES best per variant by the index's
    sketch are scored exactly (CosineIndex.best_cosines), and every memory only when too few of them pass.

    Which memories lie in the time window, the place's bounding box and a radius is one vectorised test
    (graph.columns); `passes` (as-of, kind, the exact place shape) is asked only of memories in score order,
    until k pass per variant: a window of 10,000 memories checked one by one in Python took longer than
    the whole search may."""
    circle = (where.point[0], where.point[1], where.radius_m) if where.point is not None else None
    seqs = graph.columns.window(where.after_ns, before_ns, where.box(), where.frame_id, circle)
    if len(seqs) > EXACT_CANDIDATES:
        return None
    verdicts: dict[int, TextNode | None] = {}  # seq -> the memory if it passes

    def passing(seq: int) -> TextNode | None:
        if seq not in verdicts:
            node = graph.text.get(graph.text_by_seq.get(seq, ""))
            verdicts[seq] = node if node is not None and passes(node) else None
        return verdicts[seq]

    positions, scores = graph.text_index.best_cosines(seqs, vectors, RANKED_CANDIDATES)
    best, short = _k_passing(seqs[positions], scores, passing, k)
    if short and len(positions) < len(seqs):  # too many of the sketch's best failed the check: all, exactly
        best, _ = _k_passing(seqs, graph.text_index.cosines(seqs, vectors), passing, k)
    return best


def _k_passing(seqs: np.ndarray, scores: np.ndarray, passing, k: int) -> tuple[dict[str, float], bool]:
    """(node_id -> best cosine over the columns of the k best rows per column that pass, whether a column had
    fewer than k passing rows)."""
    best: dict[str, float] = {}
    short = False
    for column in scores.T:
        found = 0
        for row in _best_first(column, k):
            if (node := passing(int(seqs[row]))) is not None:
                best[node.node_id] = max(best.get(node.node_id, -2.0), float(column[row]))
                found += 1
                if found == k:
                    break
        short = short or found < k
    return best, short


def _best_first(scores: np.ndarray, k: int):
    """Row indices in descending score order, lazily: the best 4k first (a partial sort), the rest only
    when the caller asks for more (most of them failed its check)."""
    head = min(len(scores), 4 * k)
    if head == 0:
        return
    first = np.argpartition(-scores, head - 1)[:head] if head < len(scores) else np.arange(len(scores))
    first = first[np.argsort(-scores[first], kind="stable")]
    yield from first
    if head < len(scores):
        order = np.argsort(-scores, kind="stable")
        seen = set(first.tolist())
        yield from (row for row in order if int(row) not in seen)
