"""Whose fact: a model fact made from a line its speaker said of themselves belongs to that speaker.

The small model gives a line's first-person facts to another label of the clip: "I'll bring the eggs
on Wednesday", said by a person only heard (<voice_3>), was stored as "<face_3> brings eggs on
Wednesday."; "I came by train from Harbor Street today" as another person's fact. On the eight dev
households (2026-12-06), 5 of the 67 model facts that could be traced to one line were about someone
other than the person who said them of themselves.

A fact about one person is traced to the line most of its longer words come from (MIN_SHARED or more,
more than from any other line). When that line speaks of its speaker in the first person singular
("I", "my") and not of the one spoken to ("you", "your": "your chain is worn out" is the listener's),
the fact is the speaker's, and written on another person's label it is moved to the speaker's label.
A line whose speaker is uncertain moves nothing (name_mentions: who said it is not known).
"""

from __future__ import annotations

import re

from m3_memory.graph.tags import TAG_RE, tags_in
from m3_memory.memorize.grounding import STEM, WORD_RE, stem
from m3_memory.memorize.name_mentions import UNCERTAIN, Turns

MIN_SHARED = 2  # longer words a fact must share with a line to be traced to it
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|im|my|mine|myself)\b", re.I)  # not "let me", not "we"
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'll)\b", re.I)


def _stems(text: str) -> set[str]:
    return {stem(w) for w in WORD_RE.findall(TAG_RE.sub(" ", text)) if len(w) > STEM}


def source_line(fact: str, texts: list[str]) -> int | None:
    """The 0-based line the fact's words come from, or None when no line or more than one line fits."""
    words = _stems(fact)
    shared = [len(words & _stems(text)) for text in texts]
    best = max(shared, default=0)
    return shared.index(best) if best >= MIN_SHARED and shared.count(best) == 1 else None


def owned(fact: str, turns: Turns) -> str:
    """The fact, on its speaker's label when it was made from a line that speaker said of themselves."""
    labels = tags_in(fact)
    if len({turns.person(label) for label in labels}) != 1:
        return fact
    line = source_line(fact, turns.texts)
    if line is None:
        return fact
    speaker, text = turns.speakers[line], turns.texts[line]
    if speaker == UNCERTAIN or not _FIRST_PERSON.search(text) or _SECOND_PERSON.search(text):
        return fact
    if turns.person(speaker) == turns.person(labels[0]):
        return fact
    return TAG_RE.sub(f"<{speaker}>", fact)
