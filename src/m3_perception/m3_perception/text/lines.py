"""A line of text read in a frame, frame validation and the resize before reading: shared by
every OCR back-end and the region tracker (kept apart from the factory so they import no cycle)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

Point = tuple[float, float]


@dataclass(frozen=True)
class TextLine:
    """One line of text read in a frame; coordinates are pixels of the frame given to read()."""

    text: str
    confidence: float  # the recogniser's score in [0, 1]
    quad: tuple[Point, Point, Point, Point]  # corners, clockwise, as the detector orders them (top-left first)
    x: int
    y: int
    w: int
    h: int

    @staticmethod
    def from_quad(text: str, confidence: float, quad: np.ndarray, width: int, height: int) -> TextLine:
        """A line from a 4x2 quad; the axis-aligned box is clipped to the frame."""
        q = np.asarray(quad, dtype=np.float64).reshape(4, 2)
        x0 = max(0, math.floor(q[:, 0].min()))
        y0 = max(0, math.floor(q[:, 1].min()))
        x1 = min(width, math.ceil(q[:, 0].max()))
        y1 = min(height, math.ceil(q[:, 1].max()))
        corners = tuple((round(float(px), 1), round(float(py), 1)) for px, py in q)
        return TextLine(text, float(confidence), corners, x0, y0, max(0, x1 - x0), max(0, y1 - y0))  # type: ignore[arg-type]


def check_frame(rgb_frame: np.ndarray) -> None:
    """Reject what is not an HxWx3 uint8 image, with the reason (a silent wrong read is worse)."""
    if not isinstance(rgb_frame, np.ndarray):
        raise ValueError(f"frame must be a numpy array, got {type(rgb_frame).__name__}")
    if rgb_frame.dtype != np.uint8:
        raise ValueError(f"frame must be uint8, got {rgb_frame.dtype}")
    if rgb_frame.ndim != 3 or rgb_frame.shape[2] != 3:
        raise ValueError(f"frame must be HxWx3 (RGB), got shape {rgb_frame.shape}")
    if rgb_frame.shape[0] < 8 or rgb_frame.shape[1] < 8:
        raise ValueError(f"frame too small to read text: {rgb_frame.shape[1]}x{rgb_frame.shape[0]}")


def reading_scale(height: int, width: int, max_side_px: int, min_side_px: int = 0) -> float:
    """The factor a frame is resized by before reading: the short side up to min_side_px (small
    text reads better larger), then the long side down to max_side_px (the cost cap wins)."""
    scale = max(1.0, min_side_px / min(height, width)) if min_side_px > 0 else 1.0
    return min(scale, max_side_px / max(height, width))


def rescale(rgb_frame: np.ndarray, scale: float) -> np.ndarray:
    """The frame resized by `scale` (area averaging down, bicubic up); itself when scale is 1."""
    if abs(scale - 1.0) < 1e-6:
        return rgb_frame
    h, w = rgb_frame.shape[:2]
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb_frame, size, interpolation=cv2.INTER_AREA if scale < 1.0 else cv2.INTER_CUBIC)
