"""Character error rate, the figure a text-reading benchmark reports.

Whitespace is normalised first (runs collapsed, ends stripped) because line breaks and spacing
differ between how a note was written and how an OCR engine groups its lines; case and
punctuation are kept, since they are part of what was written.
"""

from __future__ import annotations

import re

_SPACES = re.compile(r"\s+")


def normalize_whitespace(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends."""
    return _SPACES.sub(" ", text).strip()


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions) between two strings."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def cer(reference: str, hypothesis: str) -> float:
    """Levenshtein distance / reference length after whitespace normalisation.

    An empty reference gives 0.0 for an empty hypothesis and 1.0 otherwise (anything read is
    wholly wrong), so the figure stays finite. It can exceed 1.0 when much more is read than written.
    """
    ref = normalize_whitespace(reference)
    hyp = normalize_whitespace(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return levenshtein(ref, hyp) / len(ref)


def similarity(a: str, b: str) -> float:
    """1 - edit distance / longer length, on whitespace-normalised, case-folded text (1.0 = same)."""
    x = normalize_whitespace(a).casefold()
    y = normalize_whitespace(b).casefold()
    longest = max(len(x), len(y))
    return 1.0 if longest == 0 else 1.0 - levenshtein(x, y) / longest
