"""Spellings of one name. Speech recognition writes a name it has not met as it sounds, and not the same
way twice ("Sofia", "Sophie", "Sophia"; "Yusuf", "Yosuf"), and a user types it yet another way. Memory
pools such spellings when it votes on a person's name, and a question that spells a name differently
from memory still finds that person.

Why jellyfish: its Metaphone key is the standard sound key for English spellings of names, where edit
distance alone misses Sofia/Sophie and Catherine/Kathryn. Short names are left to exact matching (Tom
and Tim, Dan and Don are different people with the same key).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import jellyfish

MIN_LETTERS = 4  # shorter names: one letter is often another name (Tom, Tim)
MIN_SIMILARITY = 0.75  # Jaro-Winkler on the letters, with an equal Metaphone key (Sofia/Sophie 0.76)
CAPITALISED_RE = re.compile(r"\b([A-Z][a-z]+(?:-[A-Z][a-z]+)?)\b")


def _one_edit_apart(a: str, b: str) -> bool:
    """Levenshtein distance <= 1 (one letter changed, added or dropped)."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]


def same_name(a: str, b: str) -> bool:
    """Whether a and b are spellings of one name: equal (case aside); or both at least MIN_LETTERS
    long and one edit apart, or sounding alike (equal Metaphone keys and Jaro-Winkler >= MIN_SIMILARITY)."""
    a, b = a.strip().lower(), b.strip().lower()
    if a == b:
        return bool(a)
    if len(a) < MIN_LETTERS or len(b) < MIN_LETTERS or not (a.isalpha() and b.isalpha()):
        return False
    if _one_edit_apart(a, b):
        return True
    return (
        jellyfish.metaphone(a) == jellyfish.metaphone(b) and jellyfish.jaro_winkler_similarity(a, b) >= MIN_SIMILARITY
    )


def spelling_groups(votes: Iterable[str]) -> list[list[str]]:
    """Names grouped with their other spellings (same_name, connected groups), each group sorted."""
    groups: list[list[str]] = []
    for name in sorted(votes):
        near = [g for g in groups if any(same_name(name, m) for m in g)]
        groups = [g for g in groups if g not in near] + [sorted([name] + [n for g in near for n in g])]
    return sorted(groups)


def spelling_in(word: str, names: Iterable[str]) -> str:
    """The one name of `names` that `word` is another spelling of ("" when none or several do, or when
    `word` is itself one of them: then it means that one)."""
    names = set(names)
    if any(word.lower() == n.lower() for n in names):
        return ""
    matches = {n for n in names if same_name(word, n)}
    return matches.pop() if len(matches) == 1 else ""
