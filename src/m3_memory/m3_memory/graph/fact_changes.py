"""Which newer memory supersedes an older one, by rules (no language model).

A memory that says where an object now is ("<person_2> put the keys on the shelf.") or when an event now
happens ("the meeting moved to Friday") replaces an older memory stating another value for the same thing;
the older one is then marked superseded, never deleted. Questions, negations and hypotheticals state
nothing, so they never supersede; people's own whereabouts are not attempted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LOCATION = "location"
TIME = "time"

_TAG = re.compile(r"<(?:face|voice|person)_\d+>")
_REPORTED = re.compile(
    r"(?i)^\s*(?:[\w']+\s+){0,3}?(?:says|said|say|tells?\s+(?:me|us)|told\s+(?:me|us)|mentions|mentioned|"
    r"reports|reported)\b\s*[:,]?\s*(?:that\s+)?",
)
_FILLER = re.compile(r"(?i)^(?:(?:and|so|oh|well|also|actually|ok|okay|yes|yeah|hey|now|um|uh)\b,?\s*)+")
_SENTENCE = re.compile(r"[^.!?;]+[.!?;]*")
_CLAUSE = re.compile(
    r"(?i),\s*|\s+(?:and|but|so)\s+(?=(?:i|we|he|she|they|you|the|my|our|his|her|their|your|someone)\b)"
)
_QUESTION_START = re.compile(
    r"(?i)^(?:where|what|when|who|whose|why|how|which|did|do|does|is|are|was|were|have|has|can|could|would|will|"
    r"should|shall|may)\b",
)
_NEGATION = re.compile(r"(?i)\b(?:not|never|no longer|nowhere|neither|nor|cannot)\b|n't\b")
_HYPOTHETICAL = re.compile(
    r"(?i)^(?:when|whenever|once|unless|suppose|supposing|in case)\b|"
    r"\b(?:if|whether|might|could|would|should|may(?!\s+\d)|maybe|perhaps|wonders?|wondering|let's|please|"
    r"going to|want to|wants to|need to|needs to|have to|has to)\b",
)

# Placement verbs (active, any tense) and participles after "is/was/has been".
_PLACE_VERBS = (
    r"put|puts|putting|left|leave|leaves|placed|place|places|moved|move|moves|dropped|drop|drops|hung|hang|"
    r"stored|store|stores|parked|park|parks|keep|keeps|kept|stashed|stash|stashes|hid|hide|hides|hidden|found|"
    r"find|finds"
)
_PLACE_PARTICIPLES = r"put|left|placed|moved|dropped|hung|stored|parked|kept|stashed|hidden|found"
_TIME_PARTICIPLES = r"moved|changed|rescheduled|postponed|pushed|brought forward|shifted|delayed"
_TIME_VERBS = r"moved|move|moves|changed|change|rescheduled|reschedule|postponed|postpone|pushed|push|shifted"
_PREPS = r"in front of|on top of|next to|inside of|in|on|under|underneath|inside|into|onto|behind|beside|by|at|near"
_AUX = r"is|are|was|were|has been|have been|had been|got|gets|will be|'re"
_ADVERBS = r"(?:(?:now|still|currently|already|usually|always|just|back|also)\s+)*"
_FROM = r"(?:from\s+.+?\s+)?"

_PATTERNS = [
    # "<thing> is (now) stored in <place>" / "<event> was moved (from X) to <time>" / "<thing> is on <place>"
    re.compile(
        rf"(?i)^(?P<subj>.+?)\s+(?:{_AUX})\s+{_ADVERBS}(?:(?:{_PLACE_PARTICIPLES}|{_TIME_PARTICIPLES})\s+"
        rf"(?:(?:back|forward|out|up)\s+)?{_FROM}(?P<prep>{_PREPS}|to|until|till)|(?P<prep2>{_PREPS}))?\b\s*"
        r"(?P<val>.+)$",
    ),
    # "<event> moved (back) to <time>"
    re.compile(
        rf"(?i)^(?P<subj>.+?)\s+(?:{_TIME_VERBS})\s+(?:(?:back|forward)\s+)?{_FROM}(?P<prep>to|until|till)\s+(?P<val>.+)$",
    ),
    # "<someone> moved/rescheduled <thing> (back) to <place or time>"
    re.compile(
        rf"(?i)^(?P<agent>.+?)\s+(?:{_TIME_VERBS})\s+(?P<subj>.+?)\s+(?:(?:back|forward)\s+)?{_FROM}"
        r"(?P<prep>to|until|till|into|onto)\s+(?P<val>.+)$",
    ),
    # "<someone> put/left/found <thing> (back) in/on/under <place>"
    re.compile(
        rf"(?i)^(?P<agent>.+?)\s+(?:{_PLACE_VERBS})\s+(?P<subj>.+?)\s+(?:back\s+)?(?P<prep>{_PREPS})\s+(?P<val>.+)$",
    ),
    # "<the thing> went (back) to <place>" (a determiner keeps people out)
    re.compile(
        r"(?i)^(?P<subj>(?:the|my|our|his|her|their|your|[\w]+'s)\s+.+?)\s+(?:went|goes|has gone|ended up)\s+"
        r"(?:back\s+)?(?P<prep>to|into|in)\s+(?P<val>.+)$",
    ),
]

_DETERMINERS = frozenset("the a an my his her our their your its this that these those some".split())
_PRONOUNS = frozenset(
    "i me you he him she we us they them it this that these those someone somebody everyone everything "
    "something there here one".split()
)
_NOT_SUBJECT_START = frozenset("to for from with of in on at by up out off away home back about".split())

_DAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
_DAY_PHRASE = (
    rf"(?:(?:next|this|coming)\s+)?(?:{_DAY}(?:\s+(?:morning|afternoon|evening|night))?|week|weekend|month)"
    rf"|tomorrow(?:\s+(?:morning|afternoon|evening|night))?|today|tonight|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?"
)
_CLOCK = r"\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\d{1,2}:\d{2}|noon|midnight|\d{1,2} o'clock"
_TIME_VALUE = re.compile(
    rf"(?i)^(?:(?P<day>{_DAY_PHRASE})(?:\s+at\s+(?P<clock>{_CLOCK}))?|(?P<clock2>{_CLOCK})(?:\s+(?:on\s+)?"
    rf"(?P<day2>{_DAY_PHRASE}))?)$",
)
_TRAILING = re.compile(
    r"(?i)(?:\s+(?:now|again|instead|anymore|any more|too|as well|for now|for good|yesterday|earlier|today|"
    r"this morning|last night|then|already|right now))+$|\s+(?:so|because|since|while|until|before|after|when)\s.*$",
)


@dataclass(frozen=True)
class Fact:
    """What a memory states about one thing: subject (normalised noun phrase, e.g. "keys", "team lunch",
    "bob's bike"), slot ("location" or "time"), value (normalised, e.g. "kitchen drawer", "friday")."""

    subject: str
    slot: str
    value: str


def _drop_determiners(phrase: str) -> str:
    words = phrase.lower().split()
    while words and words[0] in _DETERMINERS:
        words.pop(0)
    return " ".join(words)


def _time_parts(value: str) -> tuple[str, str] | None:
    """(day, clock) of a time value, either may be ""; None when value is no day or clock time."""
    value = re.sub(r"\s+", " ", value.lower().replace("a.m.", "am").replace("p.m.", "pm")).strip()
    match = _TIME_VALUE.match(value)
    if not match:
        return None
    clock = re.sub(r"(\d)\s*(am|pm)\b", r"\1 \2", match.group("clock") or match.group("clock2") or "")
    return match.group("day") or match.group("day2") or "", clock


def _time_value(value: str) -> str | None:
    """The normalised time ("thursday at 3 pm"), or None."""
    parts = _time_parts(value)
    return None if parts is None else " at ".join(part for part in parts if part)


def _clean_value(value: str) -> str:
    value = re.sub(r"[\s.!,;:\"“”]+$", "", value.strip())
    return _TRAILING.sub("", value).strip()


def _fact_in(clause: str) -> Fact | None:
    """The one fact a clause states, or None."""
    for pattern in _PATTERNS:
        match = pattern.match(clause)
        if not match:
            continue
        raw_subject = match.group("subj").strip()
        subject = _drop_determiners(raw_subject)
        words = subject.split()
        if not words or len(words) > 5 or {words[0], words[-1]} & (_NOT_SUBJECT_START | _PRONOUNS):
            continue  # "it", "someone", "for work": no thing named
        value = _clean_value(match.group("val"))
        time = _time_value(value)
        if time is None:  # "on the desk on monday": the place without its time
            value = re.sub(rf"\s+(?:on|at|by|this|last|next)?\s*(?:{_DAY_PHRASE}|{_CLOCK})$", "", value, flags=re.I)
        groups = match.groupdict()
        prep = groups.get("prep") or groups.get("prep2")
        if time is not None:
            return Fact(subject, TIME, time)
        if not prep or prep.lower() in ("until", "till"):
            continue  # "<x> is heavy": no place without a preposition
        place = _drop_determiners(value)
        if not place or place.split()[0] in _PRONOUNS:
            continue
        if len(raw_subject.split()) == 1 and raw_subject[:1].isupper():
            continue  # a bare capitalised name ("Alice is in the kitchen"): a person, not attempted
        return Fact(subject, LOCATION, place)
    return None


def _statement_clauses(text: str):
    """(sentence, clause) for each clause of a memory text that may state something: entity tags, quotes,
    the 'X says:' prefix and fillers removed; questions and negations left out (hypotheticals are the
    caller's: facts_of judges them per clause, may_state_fact per sentence)."""
    text = re.sub(r"[\"“”]", "", _TAG.sub("someone", text))
    for sentence in _SENTENCE.findall(text):
        sentence = sentence.strip()
        if not sentence or sentence.endswith("?"):
            continue
        sentence = _REPORTED.sub("", sentence.rstrip(".!;"), count=1)
        for clause in _CLAUSE.split(sentence):
            clause = _FILLER.sub("", clause.strip())
            if clause and not _QUESTION_START.match(clause) and not _NEGATION.search(clause):
                yield sentence, clause


def facts_of(text: str) -> list[Fact]:
    """The facts a memory text states (usually 0 or 1; one per clause). Entity tags like <voice_1>, <person_2>
    and the 'X says:' prefix and quotes are ignored; case-insensitive."""
    facts: list[Fact] = []
    for _, clause in _statement_clauses(text):
        fact = None if _HYPOTHETICAL.search(clause) else _fact_in(clause)
        if fact is not None and fact not in facts:
            facts.append(fact)
    return facts


def _fold(word: str) -> str:
    """A plural folded to its singular ("keys" -> "key", "boxes" -> "box", "batteries" -> "battery")."""
    if "'" in word or len(word) < 4:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _key(phrase: str) -> tuple[str, ...]:
    return tuple(_fold(word) for word in _drop_determiners(phrase).split())


def fact_key(fact: Fact) -> tuple[str, str]:
    """The index key of a fact: only facts with the same key can supersede each other (folded subject, slot)."""
    return " ".join(_key(fact.subject)), fact.slot


def _minutes(clock: str) -> tuple[int, bool]:
    """(minutes past midnight, whether the half of the day is known): "3 pm" is (900, True), "10:00" (600, False)."""
    if clock in ("noon", "midnight"):
        return (720 if clock == "noon" else 0), True
    match = re.match(r"(\d{1,2})(?::(\d{2}))?(?: o'clock)?(?: (am|pm))?$", clock)
    if not match:
        return 0, False
    hour, minute, half = int(match.group(1)), int(match.group(2) or 0), match.group(3)
    if half:
        hour = hour % 12 + (12 if half == "pm" else 0)
    return hour * 60 + minute, bool(half) or hour > 12


def _times_conflict(new: str, old: str) -> bool:
    """Whether two times differ in a part both give (a day alone never conflicts with a clock alone)."""
    a, b = _time_parts(new), _time_parts(old)
    if a is None or b is None:
        return _key(new) != _key(old)
    if a[0] and b[0] and a[0] != b[0]:
        return True
    if not (a[1] and b[1]):
        return False
    (minutes_a, known_a), (minutes_b, known_b) = _minutes(a[1]), _minutes(b[1])
    return minutes_a != minutes_b if known_a and known_b else minutes_a % 720 != minutes_b % 720


def supersedes(new: Fact, old: Fact) -> bool:
    """Whether the newer fact replaces the older: same subject (after normalisation: articles and possessive
    pronouns my/his/her/our/their/your/the dropped, plural -s/-es folded: "key" == "keys"), same slot, different value.
    A named owner is part of the subject ("Bob's keys" != "Anna's keys"), a pronoun owner is not."""
    if new.slot != old.slot or _key(new.subject) != _key(old.subject):
        return False
    if new.slot == TIME:
        return _times_conflict(new.value, old.value)
    place_new, place_old = _key(new.value), _key(old.value)
    shorter, longer = sorted((place_new, place_old), key=len)
    return bool(shorter) and longer[len(longer) - len(shorter) :] != shorter


def reading(kind: str, thing: str, value: str) -> Fact | None:
    """The Fact of a reader's answer (a model's: kind "place", "time" or "none", the thing, its place or
    time), normalised as facts_of normalises its own; None for "none" or an empty thing or value."""
    subject = _drop_determiners(_TAG.sub("someone", thing).strip(" .,"))
    value = _clean_value(value)
    if kind not in ("place", "time") or not subject or not value:
        return None
    if kind == "time":
        return Fact(subject, TIME, _time_value(value) or value.lower())
    place = _drop_determiners(re.sub(rf"(?i)^(?:{_PREPS})\s+", "", value))
    return Fact(subject, LOCATION, place) if place else None


_PLACE_CUE = re.compile(rf"(?i)\b(?:{_PREPS})\s+(?:the|a|an|my|our|his|her|their|your|[\w]+'s)\s+\w")
_TIME_CUE = re.compile(rf"(?i)\b(?:{_DAY_PHRASE}|{_CLOCK})\b")


def may_state_fact(text: str) -> bool:
    """Whether a memory the rules read no fact in may still state one for a model reader: a clause that is
    no question, negation or hypothetical, of at least four words, with a place ("by the front door") or a
    time ("on Tuesday", "at 3 pm") in it ("The dog leash hangs by the front door.", "the book club meets
    on Tuesday"). Cheap, and meant to be wide: the model decides what the clause states."""
    return any(
        len(clause.split()) >= 4
        and not _HYPOTHETICAL.search(sentence)  # "if it rains, leave it by the door": all of it hypothetical
        and (_PLACE_CUE.search(clause) or _TIME_CUE.search(clause))
        for sentence, clause in _statement_clauses(text)
    )


def worth_reading(new_facts: list[Fact], old_text: str, old_facts: list[Fact]) -> bool:
    """Whether an older memory near a new statement should be read again by a model reader: the rules
    read the same thing in it, or read nothing but it names the new fact's thing (its last word, e.g.
    "leash" of "dog leash"): "The dog leash hangs by the front door." states what no pattern reads."""
    keys = {fact_key(fact) for fact in new_facts}
    if old_facts:
        return any(fact_key(fact) in keys for fact in old_facts)
    words = {_fold(word) for word in re.findall(r"[a-z']+", old_text.lower())}
    return any(_key(fact.subject)[-1:] and _key(fact.subject)[-1] in words for fact in new_facts)
