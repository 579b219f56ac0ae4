"""What a line says about the one it is said to: "you" resolved by the turns.

People tell each other facts about the listener as often as about themselves: "I know you hate
mushrooms", "then you can make the croissants on Saturdays", "your desk is by the window". And a yes/no
question answered yes or no is a fact about the one who answered ("Are you still coaching the choir?" /
"Yes, every Monday."). Stored only as quoted lines, such facts are about "you", and the reasoner has to
work out who that was; a small model mostly gives them to the speaker (issue 20's households: "Which person
does not like mushrooms?" answered with the name of the one who said "I know you hate mushrooms").

The listener is found as a name said to someone is (name_mentions.Turns.whose, role `addressed`): the next
other speaker, or the one who spoke before when the line answers. A line or answer whose speaker is
uncertain gives nothing, and so does "you" said to a group ("you two", "you all") or in a set phrase
("you know", "you're welcome"). The facts are written with labels, as self_facts writes them:
"<voice_2> hates mushrooms.", "<voice_3> can drive <voice_2> to practice on Saturday."
"""

from __future__ import annotations

import re

from m3_memory.memorize.english import ADVERBS, third_person
from m3_memory.memorize.name_mentions import TURN_GAP_NS, UNCERTAIN, Turns

# A statement about "you" after these openings is the speaker's ("I know you hate mushrooms").
_LEAD = re.compile(
    r"^(?:(?:and|so|then|well|oh|now|also|okay|ok|right|yes|yeah|good|great|of course|remember),?\s+)*"
    r"(?:i (?:know|think|heard|hear|see|remember|guess|believe)(?: that)?\s+)?",
    re.I,
)
# A greeting or a name before the comma ("Good morning, you must be...", "Ines, are you...?").
_CALL = re.compile(r"^(?:(?i:hi|hey|oh|and)\s+)?[A-Z][a-z]+,\s")  # "Lena, ..." / "Hey Lena, ..."
_OPENING = re.compile(r"^[^,]{1,24},\s+(?=(?:are|do|can|will|could|would|did|have|you|your)\b)", re.I)
# "you" followed by these is a set phrase or speaks to several people, not a fact about one listener.
_NOT_ONE = frozenset(
    "know see mean guess bet too two three both all guys lot people there here sure welcome kidding joking "
    "again first".split()
)
_MODALS = frozenset("can will should must could would".split())
_NEGATED = {
    "can't": "cannot",
    "cannot": "cannot",
    "won't": "will not",
    "shouldn't": "should not",
    "don't": "does not",
    "didn't": "did not",
    "never": "never",
}
_IS_STARTS = frozenset("a an the from allergic married vegetarian vegan in on at not still always".split())
YES = re.compile(r"^\W*(?:yes|yeah|yep|sure|of course|absolutely|definitely|certainly|i do|i am|i can|i will)\b", re.I)
NO = re.compile(r"^\W*(?:no|nope|not really|i don't|i do not|i'm not|i am not|i can't|i cannot|i won't)\b", re.I)
_QUESTION = re.compile(r"^(are|do|can|will|could|would|did|have)\s+you\s+(\w+)\s*(.*)$", re.I)


def _reflect(rest: str, speaker: str, listener: str) -> str:
    """ "my"/"me" -> the speaker's label, "your"/"you" -> the listener's, in the rest of a clause."""
    swaps = [
        (r"\byourself\b", f"<{listener}>"),
        (r"\byours\b", f"<{listener}>'s"),
        (r"\byour\b", f"<{listener}>'s"),
        (r"\byou\b", f"<{listener}>"),
        (r"\bmyself\b", f"<{speaker}>"),
        (r"\bmine\b", f"<{speaker}>'s"),
        (r"\bmy\b", f"<{speaker}>'s"),
        (r"\bme\b", f"<{speaker}>"),
        (r"\bus\b", f"<{speaker}> and others"),
    ]
    for pattern, label in swaps:
        rest = re.sub(pattern, label, rest, flags=re.I)
    return rest.strip(" ,")


def _clauses(text: str) -> list[tuple[str, bool, bool]]:
    """(clause, is a question, calls someone) for the text's sentences and their ", and"/", but" parts,
    with their openings ("so", "I know", "Ines,") taken off. A sentence after the first that opens with a
    name ("Thanks. Lena, are you...?") calls the next speaker, though the line opened by answering."""
    out = []
    for k, sentence in enumerate(re.findall(r"[^.!?;]+[.!?;]?", text)):
        sentence = sentence.strip()
        question, calls = sentence.endswith("?"), k > 0 and _CALL.match(sentence) is not None
        for clause in re.split(r",\s*(?:and|but|so)\s+", sentence.rstrip(".!?;")):
            if clause.strip():
                # openings may stack: "So, Ines, I know you..." (lead, then the name's comma, then "I know")
                out.append((_LEAD.sub("", _OPENING.sub("", _LEAD.sub("", clause.strip()))), question, calls))
    return out


def statement_fact(clause: str, speaker: str, listener: str) -> str | None:
    """The fact a statement about "you" or "your ..." states of the listener, or None."""
    if m := re.match(r"^your (.+?) (is|are|was|were) (.+)$", clause, re.I):
        thing = _reflect(m.group(1), speaker, listener)
        return f"The {thing.lower()} of <{listener}> {m.group(2).lower()} {_reflect(m.group(3), speaker, listener)}."
    m = re.match(r"^you(?:'re| are)\s+(\w+)\s*(.*)$", clause, re.I)
    if m and m.group(1).lower() in _IS_STARTS:
        return f"<{listener}> is {m.group(1).lower()} {_reflect(m.group(2), speaker, listener)}".strip() + "."
    m = re.match(r"^you\s+(\S+)\s+(\w+)\s*(.*)$", clause, re.I)
    if not m or m.group(1).lower() in _NOT_ONE:
        return None
    first, second, rest = m.group(1).lower(), m.group(2), _reflect(m.group(3), speaker, listener)
    if first in _MODALS or first in _NEGATED:
        if second.lower() in _NOT_ONE:
            return None
        verb = _NEGATED.get(first, first) + " " + (second if first != "never" else third_person(second))
    elif first in ADVERBS:
        verb = f"{first} {third_person(second)}"
    elif re.fullmatch(r"[a-z]+", first) and not first.endswith("ing"):
        verb = f"{third_person(first)} {second}"
    else:
        return None
    return f"<{listener}> {verb} {rest}".strip() + "."


def answered_fact(question: str, answer: str, asker: str, answerer: str) -> str | None:
    """The fact a yes/no question about "you" and its answer state of the one who answered, or None."""
    m = _QUESTION.match(question)
    if not m or m.group(2).lower() in _NOT_ONE:
        return None
    yes, no = YES.match(answer) is not None, NO.match(answer) is not None
    if yes == no:
        return None  # neither (an answer that is not yes or no) or both
    aux, verb, rest = m.group(1).lower(), m.group(2), _reflect(m.group(3), asker, answerer)
    if aux == "are":
        said = f"is {verb}" if yes else f"is not {verb}"
    elif aux == "do":
        said = third_person(verb) if yes else f"does not {verb}"
    elif aux == "have":
        said = f"has {verb}" if yes else f"has not {verb}"
    elif aux == "did":
        said = f"did {verb}" if yes else f"did not {verb}"
    else:  # can, will, could, would: a request or an ability, agreed to or refused
        modal = "can" if aux in ("can", "could") else "will"
        said = f"{modal} {verb}" if yes else f"{'cannot' if modal == 'can' else 'will not'} {verb}"
    return f"<{answerer}> {said} {rest}".strip() + "."


def listener_facts(turns: Turns) -> list[tuple[int, str]]:
    """(line, fact) for what the clip's lines say about the ones they are said to; a statement's fact is
    on its own line, an answered question's on the answer's line (also a question that ended the previous
    clip, `Turns.before`)."""
    facts: list[tuple[int, str]] = []
    for i, (speaker, text) in enumerate(zip(turns.speakers, turns.texts, strict=True)):
        if speaker == UNCERTAIN or not re.search(r"\byou", text, re.I):
            continue
        for clause, question, calls in _clauses(text):
            listener = turns.whose(i + 1, "addressed", answering=False if calls else None)
            if not listener or turns.person(listener) == turns.person(speaker):
                continue
            if not question:
                if fact := statement_fact(clause, speaker, listener):
                    facts.append((i + 1, fact))
            elif (answer := _answer(turns, i, listener)) is not None:
                if fact := answered_fact(clause, turns.texts[answer], speaker, listener):
                    facts.append((answer + 1, fact))
    facts += _answered_across(turns)
    return list(dict.fromkeys(facts))


def _answered_across(turns: Turns) -> list[tuple[int, str]]:
    """The fact of a yes/no question that ended the previous clip, answered by the clip's first line (a
    clip boundary falls inside the exchange). The asker is not always in this clip: facts naming them
    are left out then."""
    before = turns.before
    if before is None or not turns.texts or turns.speakers[0] == UNCERTAIN:
        return []
    answerer = turns.speakers[0]
    if turns.person(answerer) == turns.person(before.speaker):
        return []
    if turns.starts and turns.starts[0] - before.end_ns > TURN_GAP_NS:
        return []
    clauses = _clauses(before.text)
    if not clauses or not clauses[-1][1]:
        return []  # the line did not end with a question
    fact = answered_fact(clauses[-1][0], turns.texts[0], before.speaker, answerer)
    if fact is None or (f"<{before.speaker}>" in fact and before.speaker not in turns.present):
        return []
    return [(1, fact)]


def _answer(turns: Turns, i: int, listener: str) -> int | None:
    """The index of the line right after line i when the listener says it, soon enough to answer."""
    j = i + 1
    if j >= len(turns.texts) or turns.speakers[j] == UNCERTAIN:
        return None
    if turns.person(turns.speakers[j]) != turns.person(listener) or turns.late(i, j):
        return None
    return j
