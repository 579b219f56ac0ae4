"""Local speaker activity over one stretch of audio: turns between back-to-back speakers, and overlap.

pyannote's segmentation-3.0 (`segmentation.Segmentation`) reads 10 s windows. A stretch is covered
by windows every `step_s` (a short one is zero-padded to one window, as pyannote pads its last
chunk). Each window's three local speakers are put in line with the speakers found so far by the
permutation that best matches their activity on the frames the windows share (pyannote's
`permutate`: least squared difference); a local speaker that matches none founds a new one. The
windows are then averaged frame by frame, each weighted by a Hamming window (its edges, where the
LSTM saw less context, count less: pyannote's aggregation), and thresholded at `onset`.

Per speaker, gaps shorter than `fill_gap_s` are filled, then runs shorter than `min_run_s` are
dropped. A frame with exactly one active speaker is that speaker's; with two or more it is overlap.
**Turns** are the maximal stretches of one speaker (silence between two runs of the same speaker
does not end a turn); **overlaps** are stretches of ≥ 2 speakers lasting at least `min_overlap_s`
(a shorter one is an onset clash at a turn change: the two turns meet at its middle), of which
at least two are also heard alone in the stretch (`trusted_overlap`).

Pure logic (numpy, scipy); the model only has to offer `activity(windows) -> (batch, frames, 3)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Protocol

import numpy as np
from scipy.optimize import linear_sum_assignment

# segmentation-3.0's geometry (segmentation.py): 10 s windows at 16 kHz, frames every 270 samples.
RATE = 16000
WINDOW = 10 * RATE  # samples per model window (the checkpoint's chunk duration)
FRAME_STEP = 270  # samples between output frames (10 · 3 · 3 · 3)
FRAME_CENTER = 495  # sample at the centre of frame 0's receptive field (991 samples wide)
LOCAL_SPEAKERS = 3
MAX_SIMULTANEOUS = 2


def num_frames(samples: int) -> int:
    """Output frames for `samples` input samples (valid convolutions and poolings, no padding)."""
    n = (samples - 251) // 10 + 1
    for k in (3, 5, 3, 5, 3):
        n = n - k + 1 if k == 5 else n // 3
    return n


class ActivityModel(Protocol):
    def activity(self, windows: np.ndarray) -> np.ndarray: ...


@dataclass
class ActivityParams:
    """Defaults chosen on real read speech joined into conversations (README, speaker turns)."""

    step_s: float = 2.5  # hop between 10 s windows [s] (pyannote's pipeline uses 1 s; 2.5 s: 4 views)
    onset: float = 0.5  # aggregated activity at or above this: the speaker speaks in the frame
    fill_gap_s: float = 0.25  # a speaker's pauses shorter than this are filled [s]
    min_run_s: float = 0.25  # a speaker's runs shorter than this are dropped [s]
    min_overlap_s: float = 0.4  # shorter overlaps are a clash at a turn change, not overlap [s]


@dataclass
class Piece:
    """One stretch [start, end) in samples: one speaker's turn (`speaker` ≥ 0) or overlap (-1)."""

    start: int
    end: int
    speaker: int

    @property
    def overlap(self) -> bool:
        return self.speaker < 0


@dataclass
class Activity:
    """Per-frame activity of the stretch's speakers and the turns/overlaps read from it."""

    active: np.ndarray  # (frames, speakers) bool, after gap filling and short-run removal
    n_samples: int
    pieces: list[Piece] = field(default_factory=list)  # turns and overlaps in time order

    @property
    def count(self) -> np.ndarray:
        """Number of active speakers per frame."""
        return self.active.sum(axis=1)

    @property
    def turns(self) -> list[Piece]:
        return [p for p in self.pieces if not p.overlap]

    @property
    def overlaps(self) -> list[Piece]:
        return [p for p in self.pieces if p.overlap]


def frame_bounds(i: np.ndarray | int) -> tuple[np.ndarray | int, np.ndarray | int]:
    """Samples [a, b) that frame i stands for: FRAME_STEP samples around its receptive field's centre."""
    c = FRAME_CENTER + FRAME_STEP * np.asarray(i)
    return c - FRAME_STEP // 2, c + FRAME_STEP - FRAME_STEP // 2


def window_starts(n: int, step: int) -> list[int]:
    """Window starts (multiples of FRAME_STEP, so frames line up) covering n samples."""
    if n <= WINDOW:
        return [0]
    return [k * step for k in range(-(-(n - WINDOW) // step) + 1)]


def align(window: np.ndarray, current: np.ndarray, eps: float = 1e-6) -> list[int]:
    """Column of `current` (frames, S; S may be 0) each local speaker of `window` (frames, 3) joins,
    minimising the squared activity difference on these shared frames; index ≥ S: a new speaker."""
    s, k = current.shape[1], window.shape[1]
    ref = np.concatenate([current, np.zeros((len(current), k))], axis=1)  # k fresh columns
    cost = ((window[:, :, None] - ref[:, None, :]) ** 2).sum(axis=0)
    cost[:, s:] -= eps  # a speaker silent on both sides founds a new one rather than join a silent one
    rows, cols = linear_sum_assignment(cost)
    return [int(c) for _, c in sorted(zip(rows, cols, strict=True))]


def aggregate(windows: list[np.ndarray], starts: list[int], min_active: float) -> np.ndarray:
    """Stitch per-window activity (frames, 3) at sample offsets `starts` into (frames, speakers)."""
    per = windows[0].shape[0]
    total = max(s // FRAME_STEP for s in starts) + per
    weight = np.hamming(per + 2)[1:-1]  # never zero, so a stretch seen by one window edge still counts
    acc = np.zeros((total, 0))
    wsum = np.zeros(total)
    for act, start in zip(windows, starts, strict=True):
        f0 = start // FRAME_STEP
        shared = wsum[f0 : f0 + per] > 0
        current = acc[f0 : f0 + per][shared] / wsum[f0 : f0 + per][shared, None]
        cols = align(act[shared], current)
        for k, c in enumerate(cols):
            if c >= acc.shape[1]:
                if act[:, k].max() < min_active:
                    continue  # a local speaker never active here founds nothing
                acc = np.concatenate([acc, np.zeros((total, 1))], axis=1)
                c = acc.shape[1] - 1
            acc[f0 : f0 + per, c] += weight * act[:, k]
        wsum[f0 : f0 + per] += weight
    return acc / np.maximum(wsum, 1e-12)[:, None]


def clean_runs(active: np.ndarray, fill_gap: int, min_run: int) -> np.ndarray:
    """One speaker's bool frames with gaps < fill_gap filled, then runs < min_run removed."""
    out = active.copy()
    for a, b, v in _runs(active):
        if not v and b - a < fill_gap and 0 < a and b < len(out):  # a pause between two runs
            out[a:b] = True
    for a, b, v in _runs(out):
        if v and b - a < min_run:
            out[a:b] = False
    return out


def _runs(x: np.ndarray) -> list[tuple[int, int, bool]]:
    """Maximal runs [a, b) of equal values of a 1-D bool array."""
    if len(x) == 0:
        return []
    cut = np.flatnonzero(np.diff(x.astype(np.int8))) + 1
    edges = [0, *cut.tolist(), len(x)]
    return [(a, b, bool(x[a])) for a, b in pairwise(edges)]


def trusted_overlap(active: np.ndarray, min_solo: int) -> np.ndarray:
    """Keep a frame's overlap only if at least two of its speakers are heard alone in the stretch for
    `min_solo` frames; otherwise the frame belongs to its most heard speaker alone. Why: on synthetic
    voices (espeak, Festival HTS) the model marks 0.7-1.2 s of one voice as two speakers, one of whom
    is never heard alone; a real overlap joins two people who each also speak on their own (an
    interjection inside another's turn is then left in that turn)."""
    solo = active & (active.sum(axis=1) == 1)[:, None]
    heard = solo.sum(axis=0) >= min_solo
    out = active.copy()
    for f in np.flatnonzero(active.sum(axis=1) >= 2):
        if np.count_nonzero(active[f] & heard) < 2:
            speakers = np.flatnonzero(active[f])
            keep = speakers[np.argmax(active[:, speakers].sum(axis=0))]
            out[f] = False
            out[f, keep] = True
    return out


def pieces_from(active: np.ndarray, n_samples: int, min_overlap: int) -> list[Piece]:
    """Turns and overlaps (see module doc) of (frames, speakers) activity, in samples of the stretch."""
    active = trusted_overlap(active, min_overlap)
    count = active.sum(axis=1)
    label = np.where(count == 1, active.argmax(axis=1) if active.shape[1] else 0, np.where(count == 0, -2, -1))
    segs = [[a, b, int(label[a])] for a, b, _ in _runs_of(label)]
    for i, s in enumerate(segs):  # a short overlap goes half to each neighbouring turn
        if s[2] == -1 and s[1] - s[0] < min_overlap:
            mid = (s[0] + s[1]) // 2
            if i > 0 and segs[i - 1][2] >= 0 and segs[i - 1][1] == s[0]:
                segs[i - 1][1] = mid
                s[0] = mid
            if i + 1 < len(segs) and segs[i + 1][2] >= 0 and segs[i + 1][0] == s[1]:
                segs[i + 1][0] = s[0]
                s[1] = s[0]
            s[2] = -1 if s[1] > s[0] else -2
    merged: list[list[int]] = []
    for a, b, lab in segs:
        if lab == -2 or b <= a:
            continue
        if merged and merged[-1][2] == lab >= 0:
            merged[-1][1] = b  # the same speaker again after a pause only
        else:
            merged.append([a, b, lab])
    out = []
    for a, b, lab in merged:
        sa, sb = int(frame_bounds(a)[0]), int(frame_bounds(b - 1)[1])
        sa, sb = max(0, sa), min(n_samples, sb)
        if sb > sa:
            out.append(Piece(sa, sb, lab))
    return out


def _runs_of(label: np.ndarray) -> list[tuple[int, int, int]]:
    if len(label) == 0:
        return []
    cut = np.flatnonzero(np.diff(label)) + 1
    edges = [0, *cut.tolist(), len(label)]
    return [(a, b, int(label[a])) for a, b in pairwise(edges)]


def speaker_activity(samples: np.ndarray, model: ActivityModel, p: ActivityParams | None = None) -> Activity:
    """Local speaker activity, turns and overlaps of one stretch of 16 kHz mono audio."""
    p = p or ActivityParams()
    x = np.asarray(samples, np.float32)
    n = len(x)
    step = max(FRAME_STEP, round(p.step_s * RATE / FRAME_STEP) * FRAME_STEP)
    starts = window_starts(n, step)
    padded = np.zeros(starts[-1] + WINDOW, np.float32)
    padded[:n] = x
    acts = model.activity(np.stack([padded[s : s + WINDOW] for s in starts]))
    if acts.shape[1] != num_frames(WINDOW):
        raise ValueError(f"segmentation gave {acts.shape[1]} frames per window, expected {num_frames(WINDOW)}")
    agg = aggregate(list(acts), starts, p.onset)
    frames = int(np.searchsorted(frame_bounds(np.arange(len(agg)))[0], n))  # frames that start inside x
    active = agg[:frames] >= p.onset
    per_frame = FRAME_STEP / RATE
    fill, run = round(p.fill_gap_s / per_frame), round(p.min_run_s / per_frame)
    for k in range(active.shape[1]):
        active[:, k] = clean_runs(active[:, k], fill, run)
    active = active[:, active.any(axis=0)] if active.shape[1] else active
    return Activity(active, n, pieces_from(active, n, round(p.min_overlap_s / per_frame)))
