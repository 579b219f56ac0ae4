"""Where turns go in an assembled conversation (real_speech.assemble_conversation): overlapping
turn changes and listener backchannels, planned on sample positions.

Real conversation is not a queue of clean turns: the next speaker often starts before the last
one has finished, and listeners drop short words ("mm", "right") into the other's turn. These
plans add both to a conversation of real recordings while keeping its reference exact.
Pure numpy, no models; every choice comes from the `rng` handed in, so a seed gives one plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

RATE = 16000
OVERLAP_S = (0.25, 1.0)  # one overlapping turn change: the next speaker starts this much early [s]
OVERLAP_CAP = 0.4  # at most this share of either turn is overlapped, so no three voices meet
BACKCHANNEL_S = (0.3, 0.8)  # a listener's short response [s]
BACKCHANNEL_MARGIN_S = 0.3  # kept clear of a turn's own edges and of other overlaps [s]


def turn_starts(lengths: Sequence[int], gaps: Sequence[int], first: int, overlaps: Sequence[int]) -> list[int]:
    """Start sample of each turn: turn k+1 follows turn k after gaps[k] samples, or starts
    overlaps[k] samples before turn k ends when that is > 0."""
    starts = [first]
    for k in range(len(lengths) - 1):
        end = starts[-1] + lengths[k]
        starts.append(end - overlaps[k] if overlaps[k] > 0 else end + gaps[k])
    return starts


def plan_overlaps(lengths: Sequence[int], share: float, rng: np.random.Generator) -> list[int]:
    """Overlap in samples at each of the len(lengths) - 1 turn changes so that overlapped time /
    speech time (union) = `share` (0 → no overlap).

    Changes are taken in random order, each overlapped by 0.25–1 s (capped at OVERLAP_CAP of the
    shorter turn, so two overlaps never meet inside one turn), until the target is reached."""
    n = len(lengths) - 1
    out = [0] * max(n, 0)
    if share <= 0 or n <= 0:
        return out
    remaining = share / (1.0 + share) * float(sum(lengths))  # O / (L - O) = share
    caps = [int(OVERLAP_CAP * min(lengths[k], lengths[k + 1])) for k in range(n)]
    if sum(caps) < remaining:
        raise ValueError(
            f"overlap_share {share} needs {remaining / RATE:.1f} s of overlap, these {len(lengths)} turns "
            f"allow {sum(caps) / RATE:.1f} s (at most {OVERLAP_CAP:.0%} of each turn): ask for more turns"
        )
    for k in rng.permutation(n):
        d = int(min(rng.uniform(*OVERLAP_S) * RATE, caps[k], remaining))
        out[k], remaining = d, remaining - d
    for k in range(n):  # the random sizes fell short: top up to the caps, in order
        d = int(min(caps[k] - out[k], max(remaining, 0.0)))
        out[k], remaining = out[k] + d, remaining - d
    return out


@dataclass
class Backchannel:
    """A listener's short word placed in the stream: `word` indexes the speaker's word list."""

    speaker: str
    start: int  # [samples]
    word: int
    inside: bool  # over another speaker's turn (overlapped speech), else in the gap between turns


def short_words(samples: np.ndarray, units: Sequence[tuple[int, int]], dip: float = 0.2) -> list[tuple[int, int]]:
    """Stretches [a, b) of BACKCHANNEL_S length that start and end between words: whole VAD units
    (speech_units) that short, else a longer unit's head or tail cut at its quietest 10 ms
    (RMS below `dip` × the unit's median) BACKCHANNEL_S from the unit's edge. Silero's units are
    phrase-long in fluent reading (a reader's units: 0.6–6.5 s), so the cut finds the words."""
    lo, hi = (int(s * RATE) for s in BACKCHANNEL_S)
    hop = RATE // 100
    out = []
    for a, b in units:
        if lo <= b - a <= hi:
            out.append((a, b))
            continue
        if b - a < lo + hi:
            continue
        n = (b - a) // hop
        rms = np.sqrt(np.mean(samples[a : a + n * hop].astype(np.float64).reshape(n, hop) ** 2, axis=1))
        floor = dip * float(np.median(rms))
        head = lo // hop + int(np.argmin(rms[lo // hop : hi // hop]))
        if rms[head] < floor:
            out.append((a, a + head * hop))
        tail = n - hi // hop + int(np.argmin(rms[n - hi // hop : n - lo // hop]))
        if rms[tail] < floor:
            out.append((a + (tail + 1) * hop, a + n * hop))
    return out


def place_backchannels(
    spans: Sequence[tuple[str, int, int]],
    word_lengths: Mapping[str, Sequence[int]],
    count: int,
    rng: np.random.Generator,
) -> list[Backchannel]:
    """`count` short words of other speakers dropped into the conversation `spans` (speaker, start,
    end in samples, in order): inside a turn's solo part (away from its edges and overlaps) or in a
    gap between turns long enough for the word, each place used once, each word at most once.

    The speaker of a word is never the one whose turn it lands in (nor, between turns, either
    neighbour when another speaker has words left). Raises ValueError when fewer places fit."""
    margin = int(BACKCHANNEL_MARGIN_S * RATE)
    places: list[tuple[int, int, set[str], bool]] = []  # (first sample, last sample, excluded speakers, inside)
    for k, (speaker, start, end) in enumerate(spans):
        solo_a = max(start, spans[k - 1][2]) if k > 0 else start
        solo_b = min(end, spans[k + 1][1]) if k + 1 < len(spans) else end
        places.append((solo_a + margin, solo_b - margin, {speaker}, True))
        if k + 1 < len(spans) and spans[k + 1][1] > end:
            places.append((end + margin // 2, spans[k + 1][1] - margin // 2, {speaker, spans[k + 1][0]}, False))
    free = {s: list(range(len(w))) for s, w in word_lengths.items()}
    out: list[Backchannel] = []
    for i in rng.permutation(len(places)):
        if len(out) == count:
            break
        a, b, excluded, inside = places[i]
        fits = {s: [w for w in idx if word_lengths[s][w] <= b - a] for s, idx in free.items() if s not in excluded}
        fits = {s: w for s, w in fits.items() if w}
        if not fits and not inside:  # a gap between two speakers: the word may be either neighbour's
            fits = {s: w for s, idx in free.items() for w in [[j for j in idx if word_lengths[s][j] <= b - a]] if w}
        if not fits:
            continue
        speaker = str(rng.choice(sorted(fits)))
        word = int(rng.choice(fits[speaker]))
        free[speaker].remove(word)
        length = word_lengths[speaker][word]
        start = int(rng.integers(a, b - length + 1)) if inside else (a + b - length) // 2
        out.append(Backchannel(speaker, start, word, inside))
    if len(out) < count:
        raise ValueError(
            f"only {len(out)} of {count} backchannels fit this conversation's {len(spans)} turns "
            f"(each needs {BACKCHANNEL_S[0]}-{BACKCHANNEL_S[1]} s plus {BACKCHANNEL_MARGIN_S} s margins): ask for fewer"
        )
    return sorted(out, key=lambda bc: bc.start)


def overlap_share(segments: Sequence[tuple[float, float, str]]) -> float:
    """Time where two or more segments' speakers talk / time where anyone does (0 when nobody)."""
    events = sorted([(a, 1) for a, _, _ in segments] + [(b, -1) for _, b, _ in segments])
    speech = overlap = 0.0
    active, last = 0, 0.0
    for t, step in events:
        if active >= 1:
            speech += t - last
        if active >= 2:
            overlap += t - last
        active, last = active + step, t
    return overlap / speech if speech > 0 else 0.0
