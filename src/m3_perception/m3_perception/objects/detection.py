"""What every object detector back-end shares: the Detection record, the frame check, the letterbox
and the filter (confidence, NMS, classes kept, box size limits) applied to raw candidates.

Why one filter for all back-ends: the limits become node parameters, and they must mean the same
thing whichever model produced the candidates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np


@dataclass(frozen=True)
class Detection:
    """One object in one frame: class name, confidence in [0, 1], box in pixels of the frame."""

    label: str
    confidence: float
    x: int
    y: int
    w: int
    h: int

    @property
    def box(self) -> tuple[int, int, int, int]:
        return (self.x, self.y, self.w, self.h)


class ObjectDetector(Protocol):
    """A back-end: `detect` takes an RGB uint8 frame (H x W x 3) and returns the objects in it."""

    name: str
    labels: tuple[str, ...]

    def detect(self, rgb_frame: np.ndarray) -> list[Detection]: ...


def check_frame(rgb_frame: np.ndarray) -> np.ndarray:
    """The frame if it is an RGB uint8 H x W x 3 array, else ValueError saying what it is."""
    if not isinstance(rgb_frame, np.ndarray):
        raise ValueError(f"a frame must be a numpy array, not {type(rgb_frame).__name__}")
    if rgb_frame.dtype != np.uint8:
        raise ValueError(f"a frame must be uint8 RGB, not {rgb_frame.dtype}")
    if rgb_frame.ndim != 3 or rgb_frame.shape[2] != 3 or rgb_frame.shape[0] < 1 or rgb_frame.shape[1] < 1:
        raise ValueError(f"a frame must be H x W x 3 (RGB), not shape {rgb_frame.shape}")
    return rgb_frame


def letterbox(rgb: np.ndarray, size: int, fill: int = 114) -> tuple[np.ndarray, float, int, int]:
    """The frame scaled to fit a size x size square, grey-padded (Darknet pads 127, Ultralytics 114):
    returns the square, the scale and the x, y padding, to map boxes back."""
    h, w = rgb.shape[:2]
    scale = min(size / h, size / w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    out = np.full((size, size, 3), fill, np.uint8)
    py, px = (size - nh) // 2, (size - nw) // 2
    out[py : py + nh, px : px + nw] = cv2.resize(rgb, (nw, nh), interpolation=interpolation)
    return out, scale, px, py


@dataclass(frozen=True)
class DetectionFilter:
    """The limits applied to every back-end's candidates, validated once (ValueError names the bad one).

    confidence: lowest score kept; nms: IoU above which the weaker box of a class is dropped;
    classes_kept: class names kept (empty: all); min_box_px: shortest side kept, in pixels;
    max_box_fraction: largest box area kept, as a fraction of the frame (a box filling the view is
    usually a wall or a table top misread); nested: of two boxes of a class one inside the other (more
    than this share of the smaller one's area in the larger), the less confident is that object seen
    twice and dropped (YOLOv3-tiny gives a person's whole figure and upper body as two boxes that NMS
    keeps: their IoU is low; 1.0 keeps both)."""

    confidence: float = 0.25
    nms: float = 0.45
    classes_kept: frozenset[str] = frozenset()
    min_box_px: int = 0
    max_box_fraction: float = 1.0
    nested: float = 0.9

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        if not 0.0 < self.nms <= 1.0:
            raise ValueError(f"nms must be in (0, 1], got {self.nms!r}")
        if not isinstance(self.min_box_px, int) or self.min_box_px < 0:
            raise ValueError(f"min_box_px must be an integer >= 0, got {self.min_box_px!r}")
        if not 0.0 < self.max_box_fraction <= 1.0:
            raise ValueError(f"max_box_fraction must be in (0, 1], got {self.max_box_fraction!r}")
        if not 0.0 < self.nested <= 1.0:
            raise ValueError(f"nested must be in (0, 1], got {self.nested!r}")

    def check_classes(self, labels: Iterable[str]) -> None:
        """ValueError when a class kept is not one the model knows (a typo would silently drop all)."""
        unknown = sorted(self.classes_kept - set(labels))
        if unknown:
            raise ValueError(f"classes_kept {unknown} are not classes of this model")

    def apply(
        self,
        boxes: np.ndarray,
        scores: np.ndarray,
        class_ids: np.ndarray,
        labels: tuple[str, ...],
        frame_hw: tuple[int, int],
    ) -> list[Detection]:
        """Detections from candidate boxes (N x 4, x y w h in frame pixels), scores and class ids:
        clipped to the frame, filtered, then non-maximum suppressed per class, best first."""
        height, width = frame_hw
        if len(boxes) == 0:
            return []
        x0 = np.clip(boxes[:, 0], 0, width)
        y0 = np.clip(boxes[:, 1], 0, height)
        x1 = np.clip(boxes[:, 0] + boxes[:, 2], 0, width)
        y1 = np.clip(boxes[:, 1] + boxes[:, 3], 0, height)
        w, h = x1 - x0, y1 - y0
        keep = (scores >= self.confidence) & (np.minimum(w, h) >= max(self.min_box_px, 1))
        keep &= w * h <= self.max_box_fraction * width * height
        if self.classes_kept:
            keep &= np.isin(class_ids, [i for i, n in enumerate(labels) if n in self.classes_kept])
        index = np.flatnonzero(keep)
        if len(index) == 0:
            return []
        rects = np.stack([x0, y0, w, h], axis=1)[index].astype(np.float32)
        kept_scores, kept_ids = scores[index].astype(float).tolist(), class_ids[index].astype(int).tolist()
        picked = cv2.dnn.NMSBoxesBatched(rects.tolist(), kept_scores, kept_ids, self.confidence, self.nms)
        out = []
        for i in index[np.asarray(picked, dtype=int).reshape(-1)]:
            label = labels[class_ids[i]] if 0 <= class_ids[i] < len(labels) else f"class_{class_ids[i]}"
            bx, by, ex, ey = (int(v) for v in np.rint([x0[i], y0[i], x1[i], y1[i]]))
            bw, bh = ex - bx, ey - by
            out.append(Detection(label, float(scores[i]), bx, by, bw, bh))
        return self._without_nested(sorted(out, key=lambda d: -d.confidence))

    def _without_nested(self, detections: list[Detection]) -> list[Detection]:
        """Best first; a box is dropped when it and a kept, more confident box of its class are one inside
        the other: more than `nested` of the smaller one's area lies in the larger."""
        kept: list[Detection] = []
        for d in detections:
            if not any(k.label == d.label and _inside(d, k) > self.nested for k in kept):
                kept.append(d)
        return kept


def _inside(a: Detection, b: Detection) -> float:
    """Share of the smaller box's area that lies in the other box."""
    ix = max(0, min(a.x + a.w, b.x + b.w) - max(a.x, b.x))
    iy = max(0, min(a.y + a.h, b.y + b.h) - max(a.y, b.y))
    return ix * iy / max(1, min(a.w * a.h, b.w * b.h))
