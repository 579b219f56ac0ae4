"""Reading written text (signs, notes, labels) in camera frames: one protocol, several back-ends.

A back-end turns an RGB frame into text lines, each with its confidence and where it is in the
frame (a 4-point quad as the detector found it, and the axis-aligned box around it), so the
memory can make the text an entity and say where it was seen. Frames larger than
`max_side_px` are downscaled first (OCR cost grows with pixels), frames smaller than
`min_side_px` upscaled (small text), and the boxes mapped back to the frame's pixels.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from m3_perception.text.lines import TextLine, check_frame, reading_scale, rescale

__all__ = [
    "BACKENDS",
    "NoTextReader",
    "TextLine",
    "TextReader",
    "check_frame",
    "make_reader",
    "reading_scale",
    "rescale",
]

BACKENDS = ("rapidocr", "none")


@runtime_checkable
class TextReader(Protocol):
    """Reads the text lines in one RGB frame (uint8, HxWx3)."""

    backend: str

    def read(self, rgb_frame: np.ndarray) -> list[TextLine]: ...


class NoTextReader:
    """The `none` back-end: reads nothing, so the node runs without an OCR model."""

    backend = "none"

    def read(self, rgb_frame: np.ndarray) -> list[TextLine]:
        check_frame(rgb_frame)
        return []


def make_reader(
    backend: str = "rapidocr",
    *,
    min_confidence: float = 0.8,
    max_side_px: int = 960,
    min_side_px: int = 0,
    threads: int = 2,
    upright_check: bool = True,
) -> TextReader:
    """A text reader by back-end name; bad values raise ValueError naming the parameter.

    min_confidence: lines scored below it are dropped (the detector finds text-like texture in
    foliage and fabric; the recogniser then reads a letter or two at low confidence).
    max_side_px: frames whose longer side is larger are downscaled before reading.
    min_side_px: frames whose short side is smaller are upscaled first (0: never), for small
    text at a distance; about 1.6x the time on a 640x480 frame with 736.
    threads: onnxruntime intra-op threads. upright_check: run the 0/180° classifier so text
    upside down is read too (costs little).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown OCR backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if isinstance(min_confidence, bool) or not isinstance(min_confidence, (int, float)):
        raise ValueError(f"min_confidence must be a number in [0, 1], got {min_confidence!r}")
    if not 0.0 <= float(min_confidence) <= 1.0:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
    if isinstance(max_side_px, bool) or not isinstance(max_side_px, int) or not 64 <= max_side_px <= 4096:
        raise ValueError(f"max_side_px must be an integer in [64, 4096], got {max_side_px!r}")
    if isinstance(min_side_px, bool) or not isinstance(min_side_px, int) or not 0 <= min_side_px <= 4096:
        raise ValueError(f"min_side_px must be an integer in [0, 4096] (0: no upscaling), got {min_side_px!r}")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 64:
        raise ValueError(f"threads must be an integer in [1, 64], got {threads!r}")
    if backend == "none":
        return NoTextReader()
    from m3_perception.text.rapidocr_reader import RapidOcrReader

    return RapidOcrReader(
        min_confidence=float(min_confidence),
        max_side_px=max_side_px,
        min_side_px=min_side_px,
        threads=threads,
        upright_check=upright_check,
    )
