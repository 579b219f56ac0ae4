"""The text memories' times and places as arrays, so a time or place window is one vectorised test over
every memory instead of a Python loop (at 1M memories the loop alone took longer than a whole search).

Rows follow the order memories were cached (load, then each new one). Each row is written straight
into preallocated arrays that double when full, so adding a memory is O(1) amortised and a filter never
rebuilds anything (concatenating after each clip made ingest O(N) a clip at 1M memories).

A time window is cut to a slice of rows before any row is tested: two monotone columns, the running
maximum of end_ns and the minimum of start_ns over every later row, bound by binary search the rows that
can overlap it. Memories arrive about in time order, so the slice is about the window: testing every row
of a 1M memory took 2 ms of the 3 a time search may take. A place window is cut the same way to the rows
of the grid cells (CELL_M square, per frame) its bounding box touches, tested on the x and y each cell keeps.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from m3_memory.graph.records import TextNode

INITIAL_CAPACITY = 1024
_FIELDS = (("seq", np.int64), ("start_ns", np.int64), ("end_ns", np.int64), ("x", np.float64), ("y", np.float64),
           ("frame", np.int32))  # fmt: skip
# the monotone bounds (module docstring): end_ns's running maximum, start_ns's minimum from the row on
_BOUNDS = (("max_end_ns", np.int64), ("min_start_ns", np.int64))
CELL_M = 2.0  # the place grid's cell side [m] (a room is a few cells)
MAX_CELLS = 4096  # a box over more cells than this (a whole building) is tested row by row instead


class _Grid:
    """Rows by place: (frame code, cell x, cell y) -> the rows whose place lies in that cell, in row order, with
    their x and y beside them (a window's rows lie scattered over the store: reading x and y from the columns
    took a third of a 1M-memory place search)."""

    def __init__(self) -> None:
        self._cells: dict[tuple[int, int, int], list] = {}  # key -> [rows array, (n, 2) x y array, count]

    def add(self, row: int, frame: int, x: float, y: float) -> None:
        if not (math.isfinite(x) and math.isfinite(y)):
            return
        cell = self._cells.setdefault(
            (frame, math.floor(x / CELL_M), math.floor(y / CELL_M)), [np.zeros(8, np.int64), np.zeros((8, 2)), 0]
        )
        if cell[2] == len(cell[0]):
            cell[0] = np.resize(cell[0], 2 * len(cell[0]))
            cell[1] = np.resize(cell[1], (2 * len(cell[1]), 2))
        cell[0][cell[2]] = row
        cell[1][cell[2]] = x, y
        cell[2] += 1

    def rows(
        self, frame: int, box: tuple[float, float, float, float], circle: tuple[float, float, float] | None
    ) -> np.ndarray | None:
        """The rows in the box (and the circle, when given), in row order; None when the box touches more than
        MAX_CELLS cells."""
        min_x, min_y, max_x, max_y = box
        if not all(math.isfinite(v) for v in box):
            return None
        xs = range(math.floor(min_x / CELL_M), math.floor(max_x / CELL_M) + 1)
        ys = range(math.floor(min_y / CELL_M), math.floor(max_y / CELL_M) + 1)
        if len(xs) * len(ys) > MAX_CELLS:
            return None
        cells = [c for i in xs for j in ys if (c := self._cells.get((frame, i, j))) is not None]
        if not cells:
            return np.zeros(0, np.int64)
        rows = np.concatenate([c[0][: c[2]] for c in cells])  # one test over all the cells' rows, not one a cell
        x, y = np.concatenate([c[1][: c[2]] for c in cells]).T
        keep = (x >= min_x) & (x <= max_x) & (y >= min_y) & (y <= max_y)
        if circle is not None:
            keep &= _in_circle(x, y, circle)
        # each cell's rows are ascending: a merge of runs (timsort, "stable") is 7x quicker than quicksort here
        return np.sort(rows[keep], kind="stable")


class TextColumns:
    """seq, start_ns, end_ns, x, y (NaN without a place) and frame (a small code: comparing strings over every
    memory took longer than the rest of a place search) of every cached text memory, as numpy views of
    the rows added so far."""

    def __init__(self, capacity: int = INITIAL_CAPACITY) -> None:
        self._frames: dict[str, int] = {"": -1}  # frame_id -> code; "" = no place
        self._count = 0
        self._lock = threading.Lock()
        self._buffers = {name: np.zeros(max(1, capacity), dtype) for name, dtype in _FIELDS + _BOUNDS}
        self._grid = _Grid()

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
            max_end, min_start = self._buffers["max_end_ns"], self._buffers["min_start_ns"]
            max_end[row] = max(node.end_ns, int(max_end[row - 1])) if row else node.end_ns
            min_start[row] = node.start_ns
            later = int(np.searchsorted(min_start[:row], node.start_ns, side="right"))  # rows starting later
            min_start[later:row] = node.start_ns
            self._grid.add(row, code, x, y)
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
        circle: tuple[float, float, float] | None = None,
    ) -> np.ndarray:
        """seq of the memories that end at or after after_ns, start at or before before_ns (0: no limit) and,
        with box (min_x, min_y, max_x, max_y), lie in it in frame_id, and with circle (x, y, radius) about
        in it (a hair's tolerance); the caller checks the exact shape."""
        with self._lock:  # one consistent set of rows, even while a clip is being added
            n = self._count
            low = int(np.searchsorted(self._buffers["max_end_ns"][:n], after_ns)) if after_ns > 0 else 0
            high = n
            if before_ns > 0:
                high = int(np.searchsorted(self._buffers["min_start_ns"][:n], before_ns, side="right"))
            frame_code = self._frames.get(frame_id, -2)
            rows = self._grid.rows(frame_code, box, circle) if box is not None else None
            if rows is not None:  # the grid's rows of this frame in the box: only their times are read
                return self._in_time(rows[(rows >= low) & (rows < high)], after_ns, before_ns)
            cols = {name: self._buffers[name][low:high] for name, _ in _FIELDS}
        keep = np.ones(len(cols["seq"]), bool)
        if after_ns > 0:
            keep &= cols["end_ns"] >= after_ns
        if before_ns > 0:
            keep &= cols["start_ns"] <= before_ns
        if box is not None:
            min_x, min_y, max_x, max_y = box
            x, y = cols["x"], cols["y"]
            keep &= (x >= min_x) & (x <= max_x) & (y >= min_y) & (y <= max_y)
            keep &= cols["frame"] == frame_code
        if circle is not None:
            inside = np.flatnonzero(keep)
            keep[inside[~_in_circle(cols["x"][inside], cols["y"][inside], circle)]] = False
        return cols["seq"][keep]

    def _in_time(self, rows: np.ndarray, after_ns: int, before_ns: int) -> np.ndarray:
        """window()'s time test on the grid's rows, lock held (each column read only for the rows still in)."""
        if after_ns > 0:
            rows = rows[self._buffers["end_ns"][rows] >= after_ns]
        if before_ns > 0:
            rows = rows[self._buffers["start_ns"][rows] <= before_ns]
        return self._buffers["seq"][rows]


def _in_circle(x: np.ndarray, y: np.ndarray, circle: tuple[float, float, float]) -> np.ndarray:
    """Which points lie in the circle (x, y, radius), with a hair's tolerance."""
    cx, cy, radius = circle
    return np.hypot(x - cx, y - cy) <= radius * (1 + 1e-9) + 1e-9
