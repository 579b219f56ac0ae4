"""Evaluation figures for the bench and the tests: word error rate, pairwise clustering F1."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations


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
