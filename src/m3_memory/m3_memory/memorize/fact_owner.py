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

The model also writes the speaker's "I" as a name: a name said elsewhere in the clip ("John is always
busy on Sunday." from "…so I'm always busy on Sunday.", with "John" a mishearing two lines before), or
one it makes up ("Tom has a dentist appointment." from "I have a dentist appointment."). A fact that
opens with a name no person of the clip is known by, made from a first-person line that names no one, is
the speaker's fact (`speaker_for_name`). A line that names someone ("My brother Tom lives in Oslo.", "My
sister Nadia moved the bike.") may be about them, and its facts stay. Traced on the dev households'
stored memories (2026-12-07): 4 facts, all 4 moved to the right speaker.

A question put to the one spoken to asserts nothing about the one asking: from "Do you take sugar in
your coffee?" the model wrote that its asker drinks coffee without sugar. A fact about one person, made
from a question that person asked of the listener ("you", "your", ending in "?") without speaking of
themselves ("I", "me", "we": "Can you drive me to practice?" says what its asker needs), is dropped
(`asked_not_said`). Traced on the stored memories of the eight dev households and the demo (2026-12-07):
1 of their 295 texts about people is dropped, that one.
"""

from __future__ import annotations

import re

from m3_memory.graph.tags import TAG_RE, tags_in
from m3_memory.memorize.common_words import is_common_word
from m3_memory.memorize.grounding import STEM, WORD_RE, stem
from m3_memory.memorize.name_mentions import UNCERTAIN, Turns
from m3_memory.memorize.name_roles import NOT_NAMES

MIN_SHARED = 2  # longer words a fact must share with a line to be traced to it
_I = "i|i'm|i've|i'll|i'd|im|my|mine|myself"
_FIRST_PERSON = re.compile(rf"\b(?:{_I})\b", re.I)  # not "let me", not "we"
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'll)\b", re.I)
_SPEAKER = re.compile(rf"\b(?:{_I}|me|we|we're|we'll|us|our|ours)\b", re.I)  # the asker, alone or in a group
_MONTHS = set("january february march april may june july august september october november december".split())
_OPENING_NAME = re.compile(r"([A-Z][a-z'-]{2,}?)(?:'s)?\b(?! and\b)")  # "Tom has …", "Tom's …"; not "John and Kovi"


def _stems(text: str) -> set[str]:
    return {stem(w) for w in WORD_RE.findall(TAG_RE.sub(" ", text)) if len(w) > STEM}


def source_line(fact: str, texts: list[str]) -> int | None:
    """The 0-based line the fact's words come from, or None when no line or more than one line fits."""
    words = _stems(fact)
    shared = [len(words & _stems(text)) for text in texts]
    best = max(shared, default=0)
    return shared.index(best) if best >= MIN_SHARED and shared.count(best) == 1 else None


def _traced(fact: str, turns: Turns) -> tuple[str, str] | None:
    """(speaker, text) of the line the fact was made from (source_line), or None."""
    line = source_line(fact, turns.texts)
    return None if line is None else (turns.speakers[line], turns.texts[line])


def owned(fact: str, turns: Turns) -> str:
    """The fact, on its speaker's label when it was made from a line that speaker said of themselves."""
    labels = tags_in(fact)
    if len({turns.person(label) for label in labels}) != 1:
        return fact
    traced = _traced(fact, turns)
    if traced is None or not _says_of_self(*traced):
        return fact
    speaker = traced[0]
    if turns.person(speaker) == turns.person(labels[0]):
        return fact
    return TAG_RE.sub(f"<{speaker}>", fact)


def _says_of_self(speaker: str, text: str) -> bool:
    """Whether a line speaks of its (known) speaker in the first person and not of the one spoken to."""
    return speaker != UNCERTAIN and bool(_FIRST_PERSON.search(text)) and not _SECOND_PERSON.search(text)


def _names_someone(text: str) -> bool:
    """Whether a line has a capitalised word past a sentence's start that is no common word, day, month or "I"."""
    for sentence in re.split(r"[.!?]+", text):
        for word in WORD_RE.findall(sentence)[1:]:
            bare = word.lower().removesuffix("'s")
            if word[0].isupper() and not (word == "I" or word.startswith("I'") or is_common_word(bare)):
                if bare not in NOT_NAMES and bare.removesuffix("s") not in NOT_NAMES and bare not in _MONTHS:
                    return True
    return False


def speaker_for_name(fact: str, turns: Turns, known: set[str]) -> str:
    """The fact with its opening name written as the speaker's label, when no person of the clip is known
    by that name (`known`: the clip's names, casefolded) and the fact was made from a line its speaker
    said of themselves without saying the name (above)."""
    opening = _OPENING_NAME.match(fact)
    if opening is None or opening[1].casefold() in known or is_common_word(opening[1]):
        return fact
    traced = _traced(fact, turns)
    if traced is None or not _says_of_self(*traced) or _names_someone(traced[1]):
        return fact
    return f"<{traced[0]}>{fact[opening.end(1) :]}"


def _asks_the_listener(text: str) -> bool:
    """Whether a line is a question to the one spoken to that does not speak of its asker."""
    return text.rstrip().endswith("?") and bool(_SECOND_PERSON.search(text)) and not _SPEAKER.search(text)


def asked_not_said(fact: str, turns: Turns) -> bool:
    """Whether a fact about one person was made from a question that person put to the listener (above)."""
    labels = tags_in(fact)
    if not labels or len({turns.person(label) for label in labels}) != 1:
        return False
    traced = _traced(fact, turns)
    if traced is None:
        return False
    speaker, text = traced
    return speaker != UNCERTAIN and turns.person(speaker) == turns.person(labels[0]) and _asks_the_listener(text)
