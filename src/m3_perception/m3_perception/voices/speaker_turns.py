"""Speaker turns inside one voiced segment: where does the voice change?

People in a conversation often answer without a pause, so one VAD segment can hold several
speakers. Windows of `window_s` are embedded every `hop_s`; at each candidate boundary t the window
that ends at t is compared with the window that starts at t (both lie wholly on one side, so at a
real change each holds one voice only). Boundaries where that cosine falls below `change_cosine` are
taken lowest first, at least `min_turn_s` apart and from the segment's ends, so a turn shorter
than `min_turn_s` is never split off (a short "yes" is too short to embed reliably). Adjacent pieces
whose whole-piece embeddings still agree (cosine ≥ `merge_cosine`) are joined again: one noisy
window pair must not cut one person's sentence in two. A segment heard through a narrow-band
(telephone) channel (band.py) is cut at `change_cosine_narrowband` and rejoined at
`merge_cosine_narrowband` instead, for the reason the voice pipeline matches such turns at
voice_match_cosine_narrowband: the band brings different speakers' embeddings closer, so the windows
of two callers meet at higher cosines, and their pieces agree as much as two pieces of one speaker do
wide-band.

Pure logic (numpy); the encoder only has to offer `encode(samples)` and, optionally, the batched
`encode_windows(samples, window_s, hop_s)` (resemblyzer's VoiceEncoder has it).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from m3_perception.voices.band import is_narrowband

RATE = 16000


@dataclass
class TurnParams:
    """Defaults chosen from same/different-speaker window cosines on real recordings (README): those
    of the default speaker back-end, CAM++ (resemblyzer's: change 0.65, merge 0.75;
    m3_perception.assembly.TURN_CHANGE_COSINE / TURN_MERGE_COSINE)."""

    enabled: bool = True
    window_s: float = 1.0  # embedded window on each side of a candidate boundary [s]
    hop_s: float = 0.1  # candidate boundaries every hop [s]
    change_cosine: float = 0.30  # adjacent windows below this cosine: a change of voice
    # the same for a segment heard through a narrow-band channel; used when above change_cosine
    change_cosine_narrowband: float = 0.0
    merge_cosine: float = 0.45  # adjacent pieces at or above this cosine: one voice after all
    # the same for a segment heard through a narrow-band channel; used when above merge_cosine
    merge_cosine_narrowband: float = 0.0
    min_turn_s: float = 1.0  # shortest turn split off; shorter segments found no new voice [s]


def window_embeddings(encoder: Any, samples: np.ndarray, window_s: float, hop_s: float) -> np.ndarray:
    """Unit embeddings of the windows [k·hop, k·hop + window) that fit in `samples`, shape (n, d)."""
    batched = getattr(encoder, "encode_windows", None)
    if batched is not None:
        return batched(samples, window_s, hop_s)
    w, h = round(window_s * RATE), round(hop_s * RATE)
    starts = range(0, len(samples) - w + 1, h)
    return np.stack([encoder.encode(samples[s : s + w]) for s in starts]) if len(samples) >= w else np.zeros((0, 0))


def boundary_cosines(embs: np.ndarray, lag: int) -> np.ndarray:
    """Cosine between the window ending at boundary k·hop and the one starting there, for k = lag..n-1.

    Index i of the result is boundary k = i + lag (window k - lag ends where window k starts).
    """
    if len(embs) <= lag:
        return np.zeros(0)
    return np.sum(embs[:-lag] * embs[lag:], axis=1)


def pick_changes(cos: np.ndarray, first: int, threshold: float, min_gap: int, lo: int, hi: int) -> list[int]:
    """Boundaries (in hops) below `threshold`, lowest cosine first, each at least `min_gap` hops from
    the others and inside [lo + min_gap, hi - min_gap] (lo, hi: the voiced part's ends); `cos[i]`
    scores boundary `first + i`."""
    chosen: list[int] = []
    for i in np.argsort(cos, kind="stable"):
        if cos[i] >= threshold:
            break
        k = int(i) + first
        if k - lo < min_gap or hi - k < min_gap or any(abs(k - c) < min_gap for c in chosen):
            continue
        chosen.append(k)
    return sorted(chosen)


def merge_similar(pieces: list[tuple[int, int]], embs: list[np.ndarray], merge_cosine: float) -> list[int]:
    """Join adjacent pieces whose embeddings agree, most similar pair first; returns the indices of
    `pieces` that start a kept piece. `embs` are the pieces' unit embeddings (updated as they merge,
    weighted by duration)."""
    starts = list(range(len(pieces)))
    vecs = [np.asarray(e, np.float64) * (b - a) for e, (a, b) in zip(embs, pieces, strict=True)]
    while len(vecs) > 1:
        unit = [v / max(float(np.linalg.norm(v)), 1e-12) for v in vecs]
        sims = [float(unit[i] @ unit[i + 1]) for i in range(len(vecs) - 1)]
        i = int(np.argmax(sims))
        if sims[i] < merge_cosine:
            break
        vecs[i] = vecs[i] + vecs.pop(i + 1)
        starts.pop(i + 1)
    return starts


def split_turns(
    samples: np.ndarray, encoder: Any, p: TurnParams, voiced: tuple[int, int] | None = None
) -> list[tuple[int, int]]:
    """Sample ranges [a, b) of the turns in one voiced segment (one range when nothing changes).
    `voiced`: where the speech lies in `samples` (they may hold padding); turns are measured on it."""
    n = len(samples)
    lo, hi = voiced or (0, n)
    hop = round(p.hop_s * RATE)
    lag = max(1, round(p.window_s / p.hop_s))
    min_gap = max(1, round(p.min_turn_s / p.hop_s))
    if not p.enabled or hi - lo < 2 * p.min_turn_s * RATE or n < 2 * p.window_s * RATE:
        return [(0, n)]
    narrow = is_narrowband(samples[lo:hi])
    embs = window_embeddings(encoder, samples, p.window_s, p.hop_s)
    cos = boundary_cosines(embs, lag)
    change = max(p.change_cosine, p.change_cosine_narrowband) if narrow else p.change_cosine
    changes = pick_changes(cos, lag, change, min_gap, round(lo / hop), hi // hop)
    if not changes:
        return [(0, n)]
    cuts = [0, *(k * hop for k in changes), n]
    pieces = list(pairwise(cuts))
    piece_embs = [_piece_embedding(embs, a, b, hop, lag) for a, b in pieces]
    merge = max(p.merge_cosine, p.merge_cosine_narrowband) if narrow else p.merge_cosine
    kept = merge_similar(pieces, piece_embs, merge)
    bounds = [pieces[i][0] for i in kept] + [n]
    return list(pairwise(bounds))


def _piece_embedding(embs: np.ndarray, a: int, b: int, hop: int, lag: int) -> np.ndarray:
    """Mean of the windows lying inside [a, b) (the one nearest its middle when none fits), unit norm."""
    first = -(-a // hop)  # first window starting at or after a
    last = b // hop - lag  # last window ending at or before b
    if last < first:
        first = last = min(len(embs) - 1, max(0, ((a + b) // 2) // hop - lag // 2))
    v = embs[first : min(last, len(embs) - 1) + 1].mean(axis=0)
    return v / max(float(np.linalg.norm(v)), 1e-12)
