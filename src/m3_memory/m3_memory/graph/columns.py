"""The text memories' times and places as arrays, so a time or place window is one vectorised test over
every memory instead of a Python loop (at 1M memories the loop alone took longer than a whole search).

Rows follow the order memories were cached (load, then each new one); arrays are rebuilt from the
appended rows only when a filter needs them after new memories came, so adding a memory stays O(1).
"""

from __future__ import annotations

import threading

import numpy as np

from m3_memory.graph.records import TextNode


class TextColumns:
    """seq, start_ns, end_ns, x, y (NaN without a place) and frame (a small code: comparing strings over every
    memory took longer than the rest of a place search) of every cached text memory."""

    def __init__(self) -> None:
        self._rows: list[tuple[int, int, int, float, float, int]] = []
        self._frames: dict[str, int] = {"": -1}  # frame_id -> code; "" = no place
        self._built = 0
        self._lock = threading.Lock()
        self.seq = np.zeros(0, np.int64)
        self.start_ns = np.zeros(0, np.int64)
        self.end_ns = np.zeros(0, np.int64)
        self.x = np.zeros(0, np.float64)
        self.y = np.zeros(0, np.float64)
        self.frame = np.zeros(0, np.int32)

    def add(self, node: TextNode) -> None:
        place = node.place
        x, y, frame = (place.x, place.y, place.frame_id) if place is not None else (np.nan, np.nan, "")
        code = self._frames.setdefault(frame, len(self._frames) - 1)
        self._rows.append((node.seq, node.start_ns, node.end_ns, x, y, code))

    def __len__(self) -> int:
        return len(self._rows)

    def arrays(self) -> TextColumns:
        """The columns with every added row in them (built on demand, appending only what is new)."""
        with self._lock:
            if self._built < len(self._rows):
                new = self._rows[self._built :]
                seq, start, end, x, y, frame = zip(*new, strict=True)
                self.seq = np.concatenate([self.seq, np.asarray(seq, np.int64)])
                self.start_ns = np.concatenate([self.start_ns, np.asarray(start, np.int64)])
                self.end_ns = np.concatenate([self.end_ns, np.asarray(end, np.int64)])
                self.x = np.concatenate([self.x, np.asarray(x, np.float64)])
                self.y = np.concatenate([self.y, np.asarray(y, np.float64)])
                self.frame = np.concatenate([self.frame, np.asarray(frame, np.int32)])
                self._built = len(self._rows)
            return self

    def window(
        self,
        after_ns: int = 0,
        before_ns: int = 0,
        box: tuple[float, float, float, float] | None = None,
        frame_id: str = "",
    ) -> np.ndarray:
        """seq of the memories that end at or after after_ns, start at or before before_ns (0: no limit) and,
        with box (min_x, min_y, max_x, max_y), lie in it in frame_id; the caller checks the exact shape."""
        cols = self.arrays()
        keep = np.ones(len(cols.seq), bool)
        if after_ns > 0:
            keep &= cols.end_ns >= after_ns
        if before_ns > 0:
            keep &= cols.start_ns <= before_ns
        if box is not None:
            min_x, min_y, max_x, max_y = box
            keep &= (cols.x >= min_x) & (cols.x <= max_x) & (cols.y >= min_y) & (cols.y <= max_y)
            keep &= cols.frame == self._frames.get(frame_id, -2)
        return cols.seq[keep]
