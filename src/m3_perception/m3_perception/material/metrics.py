"""Evaluation figures for the bench and the tests: word error rate, pairwise clustering F1,
diarization error rate."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
# Whisper writes titles abbreviated where read-speech references spell them out ("mr" / "mister").
_ABBREVIATIONS = {"mr": "mister", "mrs": "missus", "dr": "doctor"}
_CONTRACTIONS = (("n't", " not"), ("'re", " are"), ("'m", " am"), ("'ll", " will"), ("'ve", " have"))
_ORDINALS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth"}


def number_words(n: int) -> str:
    """Cardinal in words, as references spell numbers ("four hundred twenty one"); below 10**12."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    if n < 1000:
        return _ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + number_words(n % 100))
    for size, name in ((10**9, "billion"), (10**6, "million"), (1000, "thousand")):
        if n >= size:
            rest = n % size
            return number_words(n // size) + " " + name + ("" if rest == 0 else " " + number_words(rest))
    raise AssertionError("unreachable")


def ordinal_words(n: int) -> str:
    """Ordinal in words ("twenty first")."""
    *head, last = number_words(n).split()
    if last in _ORDINALS:
        last = _ORDINALS[last]
    elif last == "twelve":
        last = "twelfth"
    else:
        last = last[:-1] + "ieth" if last.endswith("y") else last + "th"
    return " ".join([*head, last])


def normalize_text(text: str) -> str:
    """Lower case, words only: what WER should compare. Numbers go to words (ASR output has digits,
    read-speech references words; words → digits would need a parser); hyphens split words, other
    punctuation and apostrophes go. Unambiguous contractions are expanded first, as Whisper's own
    English normaliser does ("I'm" / "I am" is no error); "'s" and "'d" stay ambiguous ("it's",
    "Bob's") and lose only the apostrophe."""
    t = text.lower().replace("%", " percent").replace("&", " and ").replace("’", "'")
    t = re.sub(r"\bcan't\b", "can not", re.sub(r"\bwon't\b", "will not", t))
    for short, full in _CONTRACTIONS:
        t = re.sub(rf"(?<=[a-z]){short}\b", full, t)
    t = re.sub(r"(?<=\d),(?=\d{3})", "", t)  # 1,000 → 1000
    t = re.sub(r"(\d+)\.(\d+)", lambda m: f"{m[1]} point {' '.join(m[2])}", t)
    t = re.sub(r"(\d+)(?:st|nd|rd|th)\b", lambda m: f" {ordinal_words(int(m[1]))} " if len(m[1]) < 13 else m[1], t)
    t = re.sub(r"\d+", lambda m: f" {number_words(int(m[0]))} " if len(m[0]) < 13 else " ".join(m[0]), t)
    t = re.sub(r"['’]", "", t)
    t = re.sub(r"[^a-z0-9]+", " ", t)
    return " ".join(_ABBREVIATIONS.get(w, w) for w in t.split())


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: word-level Levenshtein distance / reference length (case-insensitive)."""
    r, h = reference.lower().split(), hypothesis.lower().split()
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d = d, [i] + [0] * len(h)
        for j in range(1, len(h) + 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (r[i - 1] != h[j - 1]))
    return d[len(h)] / max(1, len(r))


def pairwise_f1(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """F1 over all item pairs of "same cluster" decisions (1.0 = identical partitions)."""
    if len(truth) != len(predicted):
        raise ValueError("truth and predicted labels differ in length")
    tp = fp = fn = 0
    for i, j in combinations(range(len(truth)), 2):
        same_t, same_p = truth[i] == truth[j], predicted[i] == predicted[j]
        tp += same_t and same_p
        fp += same_p and not same_t
        fn += same_t and not same_p
    if tp == 0:
        return 1.0 if fp == 0 and fn == 0 else 0.0
    return 2 * tp / (2 * tp + fp + fn)


@dataclass
class Diarization:
    """Diarization error over the scored reference speech time:
    der = (missed + false_alarm + confusion) / speech, each counted per speaker (overlap scored)."""

    der: float
    missed_s: float
    false_alarm_s: float
    confusion_s: float
    speech_s: float
    mapping: dict[str, str]  # hypothesis label → reference label


Segments = Sequence[tuple[float, float, str]]


def _activity(segments: Segments, labels: list[str], n: int, step: float) -> np.ndarray:
    """(frames, labels) bool: who speaks in each `step` frame."""
    act = np.zeros((n, len(labels)), bool)
    for a, b, lab in segments:
        act[max(0, round(a / step)) : round(b / step), labels.index(lab)] = True
    return act


def _boundaries(segments: Segments) -> list[float]:
    """Start and end times of each speaker's speech, touching or overlapping pieces of one speaker
    merged first (a segment split in two has no boundary inside, as in pyannote's support())."""
    out = []
    for lab in sorted({lab for _, _, lab in segments}):
        pieces = sorted((a, b) for a, b, s in segments if s == lab)
        a0, b0 = pieces[0]
        for a, b in pieces[1:]:
            if a > b0:
                out += [a0, b0]
                a0 = a
            b0 = max(b0, b)
        out += [a0, b0]
    return out


def der(reference: Segments, hypothesis: Segments, collar: float = 0.25, step: float = 0.01) -> Diarization:
    """The standard diarization error rate (NIST md-eval, pyannote.metrics) of (start s, end s, label)
    segments, on `step` frames.

    - collar: no frame within ±`collar` s of a reference speaker boundary is scored (md-eval's
      `-c 0.25`; pyannote.metrics' `collar=0.5`, which is the total width), because where a turn
      starts and ends is not defined to better than a syllable. collar=0 scores every frame.
    - overlap scored: in a frame with N reference and M hypothesis speakers, missed = max(N−M, 0),
      false alarm = max(M−N, 0), confusion = min(N, M) − correctly mapped speakers; speech = ΣN.
    - labels are mapped one to one (Hungarian assignment maximising the scored co-occurring time);
      an unmapped hypothesis label is confusion where someone spoke, false alarm elsewhere.
    """
    from scipy.optimize import linear_sum_assignment

    end = max([e for _, e, _ in [*reference, *hypothesis]], default=0.0)
    n = int(np.ceil(end / step)) + 1
    ref_labels, hyp_labels = sorted({s for _, _, s in reference}), sorted({s for _, _, s in hypothesis})
    scored = np.ones(n, bool)
    if collar > 0 and reference:
        for t in _boundaries(reference):
            scored[max(0, round((t - collar) / step)) : max(0, round((t + collar) / step))] = False
    r = _activity(reference, ref_labels, n, step)[scored]
    h = _activity(hypothesis, hyp_labels, n, step)[scored]
    n_ref, n_hyp = r.sum(axis=1), h.sum(axis=1)
    overlap = r.T.astype(np.int64) @ h.astype(np.int64)  # scored frames where ref i and hyp j both speak
    rows, cols = linear_sum_assignment(-overlap) if overlap.size else ([], [])
    correct = np.zeros(len(r), np.int64)
    for i, j in zip(rows, cols, strict=True):
        correct += r[:, i] & h[:, j]
    speech = float(n_ref.sum()) * step
    missed = float(np.maximum(n_ref - n_hyp, 0).sum()) * step
    false_alarm = float(np.maximum(n_hyp - n_ref, 0).sum()) * step
    confusion = float((np.minimum(n_ref, n_hyp) - correct).sum()) * step
    return Diarization(
        (missed + false_alarm + confusion) / speech if speech else 0.0,
        missed,
        false_alarm,
        confusion,
        speech,
        {hyp_labels[j]: ref_labels[i] for i, j in zip(rows, cols, strict=True)},
    )


def voice_ids_per_speaker(reference: Segments, hypothesis: Segments, step: float = 0.01) -> float:
    """Mean over reference speakers of the number of distinct hypothesis labels that hold the most
    of one of that speaker's reference segments' solo time (nobody else speaking then): 1.0 = every
    speaker kept one voice id, 2.0 = each was split in two. Majority per segment, so a change found
    late does not count the neighbour's id; solo time only, so a backchannel over someone's turn or
    an overlapped turn change says nothing. A speaker with no covered solo time counts 0 (missed
    speech shows in the DER)."""
    end = max([e for _, e, _ in [*reference, *hypothesis]], default=0.0)
    n = int(np.ceil(end / step)) + 1
    hyp_labels = sorted({s for _, _, s in hypothesis})
    h = _activity(hypothesis, hyp_labels, n, step)
    solo = _activity(reference, sorted({s for _, _, s in reference}), n, step).sum(axis=1) == 1
    ids: dict[str, set[str]] = {}
    for a, b, speaker in reference:
        i, j = max(0, round(a / step)), round(b / step)
        covered = h[i:j][solo[i:j]].sum(axis=0)
        best = ids.setdefault(speaker, set())
        if covered.size and covered.max() > 0:
            best.add(hyp_labels[int(np.argmax(covered))])
    return float(np.mean([len(v) for v in ids.values()])) if ids else 0.0
