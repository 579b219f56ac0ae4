"""Object tracks with ids stable within an episode: IoU association per class, a grace period for
missed frames, and re-identification by appearance when an object comes back into view.

Why a colour histogram for appearance: an object that leaves and comes back is seen at another
position, size and often another pose, so a descriptor must not depend on where the pixels are. A
hue x saturation histogram of the box's centre (the border is mostly background) ignores position
and scale, ignores brightness changes through its hue-saturation axes, and costs one pass over the
crop in numpy; pixels too grey or too dark for a meaningful hue go to a few brightness bins instead.
A downsampled crop compared by cosine would be cheaper still but breaks as soon as the object is seen
larger, smaller or partly. Histograms are compared by the Bhattacharyya coefficient (sum of
sqrt(p q), 1 for identical distributions): it is the standard measure between distributions, is
bounded, and a few empty bins do not dominate it as they do a cosine of raw counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from m3_perception.objects.detection import Detection, check_frame

HUE_BINS, SAT_BINS, GREY_BINS = 16, 4, 8
GREY_SATURATION, DARK_VALUE = 0.15, 0.12  # below either: the hue means nothing


def appearance(rgb_frame: np.ndarray, box: tuple[int, int, int, int], inset: float = 0.15) -> np.ndarray:
    """Colour histograms of the top and bottom halves of the box's centre (`inset` of each side left
    out, where background mostly sits), each normalised, concatenated and halved. Two halves because
    objects are seen upright: one histogram of a whole person is mostly background, skin and hair
    and two people in an orange suit and a navy uniform measured 0.79 alike; by halves, 0.52."""
    x, y, w, h = box
    dx, dy = int(w * inset), int(h * inset)
    crop = rgb_frame[max(y + dy, 0) : max(y + h - dy, 0), max(x + dx, 0) : max(x + w - dx, 0)]
    if crop.size == 0:
        crop = rgb_frame[max(y, 0) : max(y + h, 0), max(x, 0) : max(x + w, 0)]
    half = (crop.shape[0] + 1) // 2
    return np.concatenate([_histogram(crop[:half]), _histogram(crop[half:] if crop.shape[0] > 1 else crop)]) / 2


def _histogram(crop: np.ndarray) -> np.ndarray:
    """A normalised HUE_BINS x SAT_BINS chromatic + GREY_BINS brightness histogram of a crop."""
    step = max(1, int(np.sqrt(crop.shape[0] * crop.shape[1] / 4096)))  # about 64 x 64 samples suffice
    px = crop[::step, ::step].reshape(-1, 3).astype(np.float32) / 255.0
    hist = np.zeros(HUE_BINS * SAT_BINS + GREY_BINS, np.float64)
    if len(px):
        v = px.max(axis=1)
        chroma = v - px.min(axis=1)
        s = np.where(v > 0, chroma / np.maximum(v, 1e-6), 0.0)
        r, g, b = px[:, 0], px[:, 1], px[:, 2]
        c = np.maximum(chroma, 1e-6)
        hue = np.where(v == r, (g - b) / c % 6, np.where(v == g, (b - r) / c + 2, (r - g) / c + 4)) / 6.0
        grey = (s < GREY_SATURATION) | (v < DARK_VALUE)
        colour_bin = np.minimum((hue * HUE_BINS).astype(int), HUE_BINS - 1) * SAT_BINS
        colour_bin += np.minimum(((s - GREY_SATURATION) / (1 - GREY_SATURATION) * SAT_BINS).astype(int), SAT_BINS - 1)
        grey_bin = HUE_BINS * SAT_BINS + np.minimum((v * GREY_BINS).astype(int), GREY_BINS - 1)
        hist += np.bincount(np.where(grey, grey_bin, colour_bin), minlength=len(hist))
    total = hist.sum()
    return hist / total if total else hist


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Bhattacharyya coefficient of two appearance descriptors (sum 1 each): 1 identical, 0 disjoint."""
    return float(np.sqrt(a * b).sum())


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in a (N x 4, x y w h) with every box in b (M x 4)."""
    ax0, ay0, ax1, ay1 = a[:, 0:1], a[:, 1:2], a[:, 0:1] + a[:, 2:3], a[:, 1:2] + a[:, 3:4]
    bx0, by0, bx1, by1 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    inter = np.clip(np.minimum(ax1, bx1) - np.maximum(ax0, bx0), 0, None) * np.clip(
        np.minimum(ay1, by1) - np.maximum(ay0, by0), 0, None
    )
    union = a[:, 2:3] * a[:, 3:4] + b[:, 2] * b[:, 3] - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-9), 0.0)


@dataclass(eq=False)  # identity, not field equality (numpy fields)
class Track:
    """One object over time. `best_crop` is the crop from the frame where it was seen most confidently."""

    object_id: str
    label: str
    confidence: float
    box: tuple[int, int, int, int]
    first_seen: float
    last_seen: float
    best_confidence: float
    best_crop: np.ndarray
    descriptor: np.ndarray = field(repr=False)
    missed: int = 0
    hits: int = 1


class ObjectTracker:
    """Tracks per class across frames. `update` takes one frame's detections and returns the tracks
    seen in it; ids ("object_N") never repeat within the tracker's life (one episode).

    iou_match: least IoU to continue a track; max_missed: frames a track is kept unseen before it
    becomes lost; reid_similarity: least Bhattacharyya coefficient to give a new detection a lost
    (or missed) track's id; reid_seconds: how long a lost track can come back; descriptor_rate: how
    fast the stored appearance follows the new views (0: first view only); new_track_confidence: least
    detector confidence that starts a track, while any kept detection continues one (ByteTrack's split
    of high and low scores, Zhang et al. 2022, at its 0.5: a weak box is trusted only where a confident
    one of its class already is; at 0.5 a faint, lasting false sighting, a cat in a portrait at 0.27-0.43,
    never becomes an object, but neither does a real cup with a note in front of it, which YOLOv3-tiny
    never sees above 0.5: 0, any kept box starts a track, is the default; see the perception README)."""

    def __init__(
        self,
        iou_match: float = 0.3,
        max_missed: int = 15,
        reid_similarity: float = 0.8,
        reid_seconds: float = 600.0,
        descriptor_rate: float = 0.2,
        new_track_confidence: float = 0.0,
    ) -> None:
        if not 0.0 < iou_match <= 1.0:
            raise ValueError(f"iou_match must be in (0, 1], got {iou_match!r}")
        if max_missed < 0:
            raise ValueError(f"max_missed must be >= 0, got {max_missed!r}")
        if not 0.0 < reid_similarity <= 1.0:
            raise ValueError(f"reid_similarity must be in (0, 1], got {reid_similarity!r}")
        if reid_seconds < 0 or not 0.0 <= descriptor_rate <= 1.0:
            raise ValueError("reid_seconds must be >= 0 and descriptor_rate in [0, 1]")
        if not 0.0 <= new_track_confidence <= 1.0:
            raise ValueError(f"object_track_confidence must be in [0, 1], got {new_track_confidence!r}")
        self.new_track_confidence = new_track_confidence
        self.iou_match, self.max_missed = iou_match, max_missed
        self.reid_similarity, self.reid_seconds, self.rate = reid_similarity, reid_seconds, descriptor_rate
        self.active: list[Track] = []
        self.lost: list[Track] = []
        self._count = 0

    def update(self, detections: list[Detection], rgb_frame: np.ndarray, stamp: float) -> list[Track]:
        """Associate this frame's detections (first by IoU within a class, then by appearance with
        missed and lost tracks), start tracks for the rest, age the unseen; the tracks seen now."""
        frame = check_frame(rgb_frame)
        descriptors = [appearance(frame, d.box) for d in detections]
        matched: dict[int, Track] = {}
        for label in {d.label for d in detections}:
            index = [i for i, d in enumerate(detections) if d.label == label]
            tracks = [t for t in self.active if t.label == label]
            if not tracks:
                continue
            iou = iou_matrix(
                np.array([detections[i].box for i in index], float), np.array([t.box for t in tracks], float)
            )
            while iou.size and iou.max() >= self.iou_match:  # greedy: best overlap first
                di, ti = np.unravel_index(int(iou.argmax()), iou.shape)
                matched[index[di]] = tracks[ti]
                iou[di, :], iou[:, ti] = -1.0, -1.0
        for i, d in enumerate(detections):
            if i in matched:
                continue
            taken = {id(t) for t in matched.values()}
            candidates = [t for t in self.active + self.lost if t.label == d.label and id(t) not in taken]
            candidates = [t for t in candidates if t in self.active or stamp - t.last_seen <= self.reid_seconds]
            scored = [(similarity(descriptors[i], t.descriptor), t) for t in candidates]
            best = max(scored, key=lambda s: s[0], default=None)
            if best is not None and best[0] >= self.reid_similarity:
                matched[i] = best[1]
                if best[1] in self.lost:
                    self.lost.remove(best[1])
                    self.active.append(best[1])
        seen = []
        for i, d in enumerate(detections):
            track = matched.get(i)
            if track is None and d.confidence < self.new_track_confidence:
                continue  # too weak to start a track: not an object until a confident box says so
            if track is None:
                self._count += 1
                track = Track(f"object_{self._count}", d.label, d.confidence, d.box, stamp, stamp, -1.0, frame[:0, :0],
                              descriptors[i], hits=0)  # fmt: skip
                self.active.append(track)
            else:
                track.descriptor = (1 - self.rate) * track.descriptor + self.rate * descriptors[i]
            track.confidence, track.box, track.last_seen, track.missed = d.confidence, d.box, stamp, 0
            track.hits += 1
            if d.confidence > track.best_confidence:
                x, y, w, h = d.box
                track.best_confidence, track.best_crop = (
                    d.confidence,
                    frame[max(y, 0) : y + h, max(x, 0) : x + w].copy(),
                )
            seen.append(track)
        seen_ids = {id(t) for t in seen}
        for track in list(self.active):
            if id(track) not in seen_ids:
                track.missed += 1
                if track.missed > self.max_missed:
                    self.active.remove(track)
                    self.lost.append(track)
        self.lost = [t for t in self.lost if stamp - t.last_seen <= self.reid_seconds]
        return seen
