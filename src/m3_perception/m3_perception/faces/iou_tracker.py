"""Greedy IoU tracker: keeps a track id per face box across frames (stream time)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Box = tuple[float, float, float, float]  # x, y, w, h in px


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two (x, y, w, h) boxes."""
    ax1, ay1, bx1, by1 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw = max(0.0, min(ax1, bx1) - max(a[0], b[0]))
    ih = max(0.0, min(ay1, by1) - max(a[1], b[1]))
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


@dataclass
class Track:
    track_id: int
    box: Box
    last_seen: float
    hits: int = 1
    frames_since_embed: int = 0
    thumb: np.ndarray | None = None  # appearance signature kept by the face pipeline


class IouTracker:
    """Match detections to live tracks by greedy highest IoU; tracks expire after `max_age_s`."""

    def __init__(self, min_iou: float = 0.3, max_age_s: float = 1.0) -> None:
        self.min_iou = min_iou
        self.max_age_s = max_age_s
        self.tracks: dict[int, Track] = {}
        self._next_id = 1

    def split(self, track: Track) -> Track:
        """End `track` and continue its box under a new track id (another person took its place)."""
        del self.tracks[track.track_id]
        new = Track(self._next_id, track.box, track.last_seen, 1, 0, track.thumb)
        self._next_id += 1
        self.tracks[new.track_id] = new
        return new

    def update(self, boxes: list[Box], stamp: float) -> list[tuple[Track, bool]]:
        """Return (track, is_new) per box, in the order of `boxes`."""
        for tid in [t for t, tr in self.tracks.items() if stamp - tr.last_seen > self.max_age_s]:
            del self.tracks[tid]
        pairs = sorted(
            ((iou(b, tr.box), i, tid) for i, b in enumerate(boxes) for tid, tr in self.tracks.items()), reverse=True
        )
        assigned: dict[int, int] = {}
        used: set[int] = set()
        for score, i, tid in pairs:
            if score < self.min_iou:
                break
            if i in assigned or tid in used:
                continue
            assigned[i] = tid
            used.add(tid)
        out: list[tuple[Track, bool]] = []
        for i, b in enumerate(boxes):
            if i in assigned:
                tr = self.tracks[assigned[i]]
                tr.box, tr.last_seen, tr.hits = b, stamp, tr.hits + 1
                out.append((tr, False))
            else:
                tr = Track(self._next_id, b, stamp)
                self._next_id += 1
                self.tracks[tr.track_id] = tr
                out.append((tr, True))
        return out
