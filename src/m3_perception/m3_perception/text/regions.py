"""Text regions across frames, and the keyframe gate that decides when OCR runs at all.

OCR costs a third of a second or more per frame on a CPU, and a sign stays put: reading every
frame would waste the budget and publish the same words thirty times a second. The gate runs
OCR at a low rate, or sooner when the view has changed; the tracker folds repeated readings of
the same text at an overlapping place into one region with a stable id ("text_2"), keeping the
most confident reading, so the memory gets one entity per piece of writing, not one per frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from m3_perception.text.cer import similarity
from m3_perception.text.lines import TextLine, check_frame

Box = tuple[int, int, int, int]


def overlap(a: Box, b: Box) -> float:
    """Intersection area over the smaller box's area (1.0 when one box holds the other)."""
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    iw = min(ax + aw, bx + bw) - max(ax, bx)
    ih = min(ay + ah, by + bh) - max(ay, by)
    smaller = min(aw * ah, bw * bh)
    if iw <= 0 or ih <= 0 or smaller <= 0:
        return 0.0
    return iw * ih / smaller


@dataclass
class TextRegion:
    """One piece of writing seen over time: its best reading and where it was last seen."""

    region_id: str
    text: str
    confidence: float
    box: Box
    first_seen: float
    last_seen: float
    sightings: int = 1
    readings: dict[str, int] = field(default_factory=dict)  # every distinct reading, with its count


@dataclass(frozen=True)
class Sighting:
    """A line of one frame assigned to a region; `new` for a first sighting, `improved` when
    this reading replaced the region's best (both worth publishing)."""

    region: TextRegion
    line: TextLine
    new: bool
    improved: bool


class TextRegionTracker:
    """Assigns read lines to regions: same (or nearly the same) text at an overlapping place."""

    def __init__(self, min_similarity: float = 0.7, min_overlap: float = 0.3, prefix: str = "text_") -> None:
        if not 0.0 < min_similarity <= 1.0:
            raise ValueError(f"min_similarity must be in (0, 1], got {min_similarity}")
        if not 0.0 < min_overlap <= 1.0:
            raise ValueError(f"min_overlap must be in (0, 1], got {min_overlap}")
        self.min_similarity = min_similarity
        self.min_overlap = min_overlap
        self.prefix = prefix
        self.regions: list[TextRegion] = []
        self._next = 1

    def update(self, lines: list[TextLine], stamp: float) -> list[Sighting]:
        """Fold one frame's lines into the regions; one sighting per line, in the lines' order.

        Matching is greedy on (text similarity, overlap), best pairs first; a region takes at
        most one line per frame, so two identical signs side by side stay two regions.
        """
        candidates = []
        for i, line in enumerate(lines):
            box = (line.x, line.y, line.w, line.h)
            for j, region in enumerate(self.regions):
                ov = overlap(box, region.box)
                if ov < self.min_overlap:
                    continue
                sim = max(similarity(line.text, region.text), *(similarity(line.text, r) for r in region.readings))
                if sim >= self.min_similarity:
                    candidates.append((sim, ov, i, j))
        candidates.sort(reverse=True)
        assigned: dict[int, int] = {}
        taken: set[int] = set()
        for _, _, i, j in candidates:
            if i not in assigned and j not in taken:
                assigned[i] = j
                taken.add(j)
        sightings = []
        for i, line in enumerate(lines):
            box = (line.x, line.y, line.w, line.h)
            if i in assigned:
                region = self.regions[assigned[i]]
                improved = line.confidence > region.confidence and line.text != region.text
                if line.confidence > region.confidence:
                    region.text, region.confidence = line.text, line.confidence
                region.box = box
                region.first_seen = min(region.first_seen, stamp)
                region.last_seen = max(region.last_seen, stamp)
                region.sightings += 1
                region.readings[line.text] = region.readings.get(line.text, 0) + 1
                sightings.append(Sighting(region, line, new=False, improved=improved))
            else:
                region = TextRegion(
                    f"{self.prefix}{self._next}", line.text, line.confidence, box, stamp, stamp, 1, {line.text: 1}
                )
                self._next += 1
                self.regions.append(region)
                sightings.append(Sighting(region, line, new=True, improved=False))
        return sightings

    def seen_since(self, stamp: float) -> list[TextRegion]:
        """Regions last seen at or after `stamp`."""
        return [r for r in self.regions if r.last_seen >= stamp]


def thumbnail(rgb_frame: np.ndarray, size: tuple[int, int] = (32, 24)) -> np.ndarray:
    """A tiny grey version of the frame (w x h block means, float32 in [0, 1]) for cheap comparison."""
    check_frame(rgb_frame)
    tw, th = size
    h, w = rgb_frame.shape[:2]
    step = max(1, min(h // (th * 4), w // (tw * 4)))  # subsample first: block means need few pixels
    grey = rgb_frame[::step, ::step].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32) / 255.0
    rows = np.linspace(0, grey.shape[0], th + 1).astype(int)
    cols = np.linspace(0, grey.shape[1], tw + 1).astype(int)
    rows_start = np.minimum(rows[:-1], grey.shape[0] - 1)
    cols_start = np.minimum(cols[:-1], grey.shape[1] - 1)
    sums = np.add.reduceat(np.add.reduceat(grey, rows_start, axis=0), cols_start, axis=1)
    counts = np.outer(np.maximum(np.diff(rows), 1), np.maximum(np.diff(cols), 1))
    return (sums / counts).astype(np.float32)


@dataclass(frozen=True)
class GateDecision:
    """Whether to read this frame, why ("first", "interval", "change", "clock", or "" for no),
    and the view change measured against the last frame read (mean grey difference, 0..1)."""

    run: bool
    reason: str
    change: float

    def __bool__(self) -> bool:
        return self.run


class KeyframeGate:
    """Decides which frames OCR reads: every `interval_s`, or after `min_gap_s` when the view
    changed by at least `change_threshold` since the last frame read. Stamps are stream time."""

    def __init__(self, interval_s: float = 5.0, min_gap_s: float = 1.0, change_threshold: float = 0.08) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if not 0 <= min_gap_s <= interval_s:
            raise ValueError(f"min_gap_s must be in [0, interval_s={interval_s}], got {min_gap_s}")
        if not 0 < change_threshold <= 1:
            raise ValueError(f"change_threshold must be in (0, 1], got {change_threshold}")
        self.interval_s = interval_s
        self.min_gap_s = min_gap_s
        self.change_threshold = change_threshold
        self._last_stamp: float | None = None
        self._last_thumb: np.ndarray | None = None

    def decide(self, rgb_frame: np.ndarray, stamp: float) -> GateDecision:
        """Decide for this frame; a positive decision records it as the last frame read."""
        thumb = thumbnail(rgb_frame)
        if self._last_stamp is None or self._last_thumb is None:
            return self._take(thumb, stamp, "first", 1.0)
        change = float(np.abs(thumb - self._last_thumb).mean())
        elapsed = stamp - self._last_stamp
        if elapsed < 0:  # stream time went back (a replay restarted): start over
            return self._take(thumb, stamp, "clock", change)
        if elapsed >= self.interval_s:
            return self._take(thumb, stamp, "interval", change)
        if elapsed >= self.min_gap_s and change >= self.change_threshold:
            return self._take(thumb, stamp, "change", change)
        return GateDecision(False, "", change)

    def _take(self, thumb: np.ndarray, stamp: float, reason: str, change: float) -> GateDecision:
        self._last_stamp, self._last_thumb = stamp, thumb
        return GateDecision(True, reason, change)
