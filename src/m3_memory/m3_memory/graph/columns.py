"""The text memories' times and places as arrays, so a time or place window is one vectorised test over
every memory instead of a Python loop (at 1M memories the loop alone took longer than a whole search).

Rows follow the order memories were cached (load, then each new one). Each row is written straight
into preallocated arrays that double when full, so adding a memory is O(1) amortised and a filter never
rebuilds anything (concatenating after each clip made ingest O(N) a clip at 1M memories).
"""

from __future__ import annotations

import threading

import numpy as np

from m3_memory.graph.records import TextNode

INITIAL_CAPACITY = 1024
_FIELDS = (("seq", np.int64), ("start_ns", np.int64), ("end_ns", np.int64), ("x", np.float64), ("y", np.float64),
           ("frame", np.int32))  # fmt: skip


class TextColumns:
    """seq, start_ns, end_ns, x, y (NaN without a place) and frame (a small code: comparing strings over every
    memory took longer than the rest of a place search) of every cached text memory, as numpy views of
    the rows added so far."""

    def __init__(self, capacity: int = INITIAL_CAPACITY) -> None:
        self._frames: dict[str, int] = {"": -1}  # frame_id -> code; "" = no place
        self._count = 0
        self._lock = threading.Lock()
        self._buffers = {name: np.zeros(max(1, capacity), dtype) for name, dtype in _FIELDS}

    def add(self, node: TextNode) -> None:
        place = node.place
        x, y, frame = (place.x, place.y, place.frame_id) if place is not None else (np.nan, np.nan, "")
        with self._lock:
            code = self._frames.setdefault(frame, len(self._frames) - 1)
            if self._count == len(self._buffers["seq"]):
                self._buffers = {name: np.resize(buf, 2 * len(buf)) for name, buf in self._buffers.items()}
            row = self._count
            values = (node.seq, node.start_ns, node.end_ns, x, y, code)
            for (name, _), value in zip(_FIELDS, values, strict=True):
                self._buffers[name][row] = value
            self._count = row + 1

    def __len__(self) -> int:
        return self._count

    def _view(self, name: str) -> np.ndarray:
        with self._lock:
            return self._buffers[name][: self._count]

    # each column as a view of the rows added so far
    seq = property(lambda self: self._view("seq"))
    start_ns = property(lambda self: self._view("start_ns"))
    end_ns = property(lambda self: self._view("end_ns"))
    x = property(lambda self: self._view("x"))
    y = property(lambda self: self._view("y"))
    frame = property(lambda self: self._view("frame"))

    def window(
        self,
        after_ns: int = 0,
        before_ns: int = 0,
        box: tuple[float, float, float, float] | None = None,
        frame_id: str = "",
    ) -> np.ndarray:
        """seq of the memories that end at or after after_ns, start at or before before_ns (0: no limit) and,
        with box (min_x, min_y, max_x, max_y), lie in it in frame_id; the caller checks the exact shape."""
        with self._lock:  # one consistent set of rows, even while a clip is being added
            n = self._count
            cols = {name: buf[:n] for name, buf in self._buffers.items()}
            frame_code = self._frames.get(frame_id, -2)
        keep = np.ones(n, bool)
        if after_ns > 0:
            keep &= cols["end_ns"] >= after_ns
        if before_ns > 0:
            keep &= cols["start_ns"] <= before_ns
        if box is not None:
            min_x, min_y, max_x, max_y = box
            x, y = cols["x"], cols["y"]
            keep &= (x >= min_x) & (x <= max_x) & (y >= min_y) & (y <= max_y)
            keep &= cols["frame"] == frame_code
        return cols["seq"][keep]
