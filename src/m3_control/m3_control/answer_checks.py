"""Answer checks on evidence: no person's name and no fact that the memories retrieved for the goal do not hold.

Why: a small model that reads "<voice_3> says: I play the cello" next to "Priya plays the violin"
answers "Who plays the cello?" with "Priya", and asked about something memory does not hold yet it
writes a plausible fact ("Bob's dog is named Charlie.") from nothing. The loop runs these checks on
every model answer (loop.py); a back-end that only quotes memory (the extractive reasoner) opts out.

Names. A capitalised word of the answer is a person's name when memory knows a person by it (its learnt names,
memory's get_names with people) or, when the question asks about a person ("who", "whose", "name", "which
person", "anyone", ...), when it is a capitalised word that nothing the robot knows explains: not in the
question, not a word of the evidence texts (in any case), not a sentence-start function word, weekday or
month; and, when the question asks who (or which person), the capitalised words the answer opens with, which
name its subject: a person, even when the evidence only mentions the word ("Diego is allergic to eggs." from a
misheard "Deal." transcribed "Diego.", "John and Kovi coach the juniors." from a misheard "Good. Kofi, …", on
dev households). Other names a "name" question asks for ("What is the name of Bob's dog?" "Charlie.") are left
to the evidence as before. A name is supported when memory attaches it to an entity of the memories its clause
rests on (the retrieved memories sharing the most of the clause's words, else of the question's, and none when
no memory shares a word with either; an entity is an id such a memory mentions or is about, named by memory or
by a retrieved "<face_1> is named Alice" memory), or when the question itself says it ("What is Emma's job?"
-> "Emma is a chef"). Any other person's name is unsupported: "Priya plays the cello" when the cello memory is
about an unnamed <voice_3>, even though Priya's violin memory was retrieved too. Nor does a line in which a
person asks or tells the one spoken to to do what a "who" answer says ("Farid, can you bring the ladder?")
support that person as the one who did it (answer_kinds.tells_listener_to): "Rosa brought the ladder."

Facts. An answer to a goal that retrieved nothing says it does not know ("my memory holds nothing
about that yet"); so does an answer none of whose new words (content words not in the question)
appear in the evidence texts with names rendered (capitalised words: the name check), counting only
the memories about the question (those sharing a content word with it, and the lines said next to
them in their clip) when any is. An answer with new words that cites no memory and that no memory
supports (supporting_ids) has empty evidence and says so too. Short
answers without new content words ("Yes, she did.") and "I don't know" answers pass; a command with
a valid plan is not checked (skills.py). An answer that fails this is not sent back for its names.
"""

from __future__ import annotations

import re

from m3_control.answer_kinds import MAX_REPLY_GAP, seq_of, tells_listener_to
from m3_control.memory_client import Memory, shown_place, shown_text
from m3_control.names import ANSWER_ID_RE, CALENDAR_WORDS, NOT_NAMES, UNNAMED, names_from, with_names
from m3_memory.graph.name_spellings import CAPITALISED_RE

NOTHING_YET = "I don't know: my memory holds nothing about that yet."
NOT_SUPPORTED = "I don't know: nothing in my memory says that."
UNNAMED_POSSESSIVE = "someone's"

DONT_KNOW_RE = re.compile(r"\b(?:don'?t|do not|does not|doesn'?t|not) know\b|\b(?:can'?t|cannot) tell\b", re.I)
WHO_RE = re.compile(r"\b(?:who|whom|which (?:person|people|man|woman|men|women))\b", re.I)  # a person is the answer
PERSON_QUESTION_RE = re.compile(
    r"\b(?:who|whom|whose|name|names|named|called|anyone|anybody|someone|somebody|everyone|everybody|"
    r"which (?:person|people|one|man|woman|men|women|guest|guests|of (?:them|us|you)))\b",
    re.I,
)
AUXILIARIES = set("will would can could should must may might shall did does do has had have".split())
SENTENCE_START_RE = re.compile(r"(?:^|[.!?:;\"]\s*)$")

STOP = set(
    "the a an is are was were be been am of to in on at by for with and or but not do does did done what who whom "
    "whose where when which why how you your me my it its this that these those there here have has had he she they "
    "we his her their our him them us yes no i one ones person people someone somebody something thing things also "
    "just very".split()
)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", re.sub(r"'s\b", "", text.lower())) if w not in STOP}


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def answer_subject(answer: str) -> set[str]:
    """The capitalised words the answer opens with, joined by "and" or commas ("John and Kovi coach …"),
    sentence-start function words aside: to a "who" question, the people it names."""
    subject = set()
    for word in re.findall(r"[A-Za-z][\w'-]*", answer):
        word = word.removesuffix("'s")
        if word.lower() in ("and", "or"):
            continue
        if not word[0].isupper() or word.lower() in NOT_NAMES:
            break
        subject.add(word)
    return subject


def asks_about_person(question: str) -> bool:
    """Whether the question asks for a person (who, whose, a name, which person, anyone ...)."""
    return bool(PERSON_QUESTION_RE.search(question))


def says_dont_know(answer: str) -> bool:
    """Whether the answer says it does not know (the stand-in for an unnamed person does not count)."""
    return bool(DONT_KNOW_RE.search(answer.replace(UNNAMED, "someone")))


def evidence_ids(evidence: list[Memory]) -> set[str]:
    """Entity ids the evidence is about: ids its texts mention, its entity_ids, and entities retrieved."""
    ids: set[str] = set()
    for memory in evidence:
        ids.update(memory.entity_ids)
        ids.update(m.group(1) or m.group(2) for m in ANSWER_ID_RE.finditer(memory.text))
        if ANSWER_ID_RE.fullmatch(memory.node_id):
            ids.add(memory.node_id)
    return ids


def _names_of(evidence: list[Memory], names: dict[str, str]) -> dict[str, str]:
    """Entity id -> name: the evidence's retrieved "is named" memories, then memory's learnt names."""
    return {**names_from(evidence), **{k: v for k, v in names.items() if v}}


def supported_names(evidence: list[Memory], names: dict[str, str]) -> set[str]:
    """Names memory attaches to an entity of the evidence (its learnt names, then retrieved "is named" memories)."""
    attached = _names_of(evidence, names)
    return {attached[e] for e in evidence_ids(evidence) if attached.get(e)}


def claim_memories(clause: str, question: str, evidence: list[Memory], names: set[str]) -> list[Memory]:
    """The memories a clause of the answer rests on: those sharing the most of its content words (names
    left out), else of the question's (as for "Priya."); none when no memory shares a word with either.
    Why none: "Which person is vegetarian?" answered "Tariq is vegetarian." from memories none of which
    says vegetarian (the line was misheard) rests on nothing, so no name in it is supported."""
    read = [(m, {_stem(w) for w in _words(m.text)}) for m in evidence]
    for text in (clause, question):
        words = {_stem(w) for w in _words(text) if w.capitalize() not in names and len(w) > 2}
        scored = [(len(words & stems), m) for m, stems in read]
        best = max((score for score, _ in scored), default=0)
        if best:
            return [m for score, m in scored if score == best]
    return []


def _as_read(memory: Memory) -> str:
    """A memory's words as the reasoner read them, with where it happened (a room question's answer)."""
    return f"{shown_text(memory)} {shown_place(memory)}"


def unsupported_names(
    answer: str, question: str, evidence: list[Memory], names: dict[str, str], people: dict[str, str]
) -> list[str]:
    """Person names in the answer that memory does not attach to an entity of the memories the claim
    rests on (rules above). names: entity id -> name memory knows for the ids seen; people: every named
    person of memory."""
    known = {n for n in [*names.values(), *people.values(), *names_from(evidence).values()] if n}
    asked = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]*", question)}
    said = " ".join(_as_read(m) for m in evidence)
    evidence_words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z-]*", said)}
    about_person = asks_about_person(question)
    subject = answer_subject(answer) if WHO_RE.search(question) else set()
    found: list[str] = []
    for match in CAPITALISED_RE.finditer(answer):
        word = match.group(1)
        if word in found or word.lower() in asked or word.lower() in NOT_NAMES:
            continue
        if word not in known and not (about_person and (word.lower() not in evidence_words or word in subject)):
            continue  # not a person's name: a place, a thing, a word the memories use
        start = max(answer.rfind(c, 0, match.start()) for c in ".;!?,")
        ends = [i for i in (answer.find(c, match.end()) for c in ".;!?,") if i >= 0]
        clause = answer[start + 1 : min(ends, default=len(answer))]
        claim = claim_memories(clause, question, evidence, known)
        if word in subject and (verb := subject_verb(answer, subject)):  # not the one who asked someone to do it
            claim = [m for m in claim if not tells_listener_to(m, verb)]
        if word not in supported_names(claim, names):
            found.append(word)
    return found


def subject_verb(answer: str, subject: set[str]) -> str:
    """The verb after the names a "who" answer opens with ("Rose brought the ladder." -> "brought", "Farid will
    drive Mateo." -> "drive"); "" when none follows them."""
    words = iter(re.findall(r"[A-Za-z][\w'-]*", answer))
    for word in words:
        if word.removesuffix("'s") not in subject and word.lower() not in ("and", "or"):
            break
    else:
        return ""
    for verb in (word, *words):
        if verb.lower() not in AUXILIARIES:
            return verb
    return ""


def replace_names(answer: str, invented: list[str]) -> str:
    """The answer with each unsupported name replaced by UNNAMED ("X's" by "someone's")."""
    if not invented:
        return answer
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in invented) + r")('s)?\b")

    def replaced(match: re.Match) -> str:
        text = UNNAMED_POSSESSIVE if match.group(2) else UNNAMED
        if SENTENCE_START_RE.search(answer[: match.start()]):
            text = text[0].upper() + text[1:]
        return text

    return pattern.sub(replaced, answer)


def names_feedback(invented: list[str], supported: set[str]) -> str:
    """The re-ask for an answer naming people the evidence does not: which names it supports, what to do."""
    said = ", ".join(invented)
    others = sorted(supported - set(invented))
    allowed = f" (the names memory gives the people found: {', '.join(others)})" if others else ""
    return (
        f"(Your answer says {said}, but the memories it rests on do not give that name to the person "
        f"they are about{allowed}. Answer again without that name: describe the person by what the memories "
        'say ("the person who plays the cello") or say that you don\'t know their name.)'
    )


def _new_words(answer: str, question: str) -> set[str]:
    """The answer's content words (stemmed) the question does not say; names are the name check's, but a
    day or a month is a fact like any other ("The dentist appointment is on Friday.")."""
    said = CAPITALISED_RE.sub(
        lambda m: m.group(0) if m.group(1).lower() in CALENDAR_WORDS else " ",
        ANSWER_ID_RE.sub(" ", answer).replace(UNNAMED, " "),
    )
    return {_stem(w) for w in _words(said) if len(w) > 2} - {_stem(w) for w in _words(question)}


def _read(memory: Memory, rendered: dict[str, str]) -> set[str]:
    """A memory's stemmed words with its ids read as the names memory gives them."""
    return {_stem(w) for w in _words(with_names(_as_read(memory), rendered, ANSWER_ID_RE))}


def unsupported_fact(answer: str, question: str, evidence: list[Memory], names: dict[str, str]) -> str:
    """ "" when the answer may stand, else the "I don't know" answer to give instead (rules above)."""
    if says_dont_know(answer):
        return ""
    if not evidence:
        return NOTHING_YET
    new = _new_words(answer, question)
    if not new:
        return ""
    rendered = _names_of(evidence, names)
    read = {m.node_id: _read(m, rendered) for m in evidence}
    have = set().union(*(read[m.node_id] for m in about_question(question, evidence, read)))
    return "" if new & have else NOT_SUPPORTED


def supporting_ids(answer: str, evidence: list[Memory], names: dict[str, str], limit: int = 5) -> list[str]:
    """The answer's evidence when the reasoner cites none: the memories sharing the most of its words (two
    or more; one for an answer of one or two), names rendered and words stemmed ("Carol plays the piano."
    rests on "<face_3> plays piano", face_3 named Carol)."""
    rendered = _names_of(evidence, names)
    words = {_stem(w) for w in _words(with_names(answer, rendered, ANSWER_ID_RE)) if len(w) > 2}
    shared = [(len(words & _read(m, rendered)), m) for m in evidence]
    scored = sorted((s for s in shared if s[0] >= 2 or (s[0] and len(words) <= 2)), key=lambda s: (-s[0], -s[1].score))
    return [m.node_id for _, m in scored[:limit]]


def rests_on_nothing(answer: str, question: str, evidence_ids: list[str]) -> str:
    """NOT_SUPPORTED for an answer that states something new while neither the reasoner cited a memory nor
    any retrieved memory shares its words (supporting_ids), else "". Why: an answer with empty evidence
    says it does not know (issue 20); the embedded model wrote "Jonas builds cars." beside "He builds
    wooden boats" (one shared word each with "car" and "build", enough for unsupported_fact)."""
    return "" if evidence_ids or says_dont_know(answer) or not _new_words(answer, question) else NOT_SUPPORTED


def about_question(question: str, evidence: list[Memory], read: dict[str, set[str]]) -> list[Memory]:
    """The memories an answer's fact may come from: those sharing the most content words with the question
    (two or more where any shares two), and the lines said just before or after one of them in its clip ("I'm
    here for the cake." beside "Here it is. Chocolate with raspberries."); all evidence when none shares one.
    read: node id -> its stemmed words. Why: a small model answers "Where are the coffee tokens kept?" with
    the printer memory's "in the kitchen", and "What do you need to use the coffee machine?" with "a laptop"
    from "our new analyst needs a laptop", which shares only the question's verb."""
    asked = {_stem(w) for w in _words(question) if len(w) > 2}
    overlap = {m.node_id: len(asked & read[m.node_id]) for m in evidence}
    best = max(overlap.values(), default=0)
    if not best:
        return list(evidence)
    sharing = [m for m in evidence if overlap[m.node_id] >= min(best, 2)]
    lines = {(m.clip_index, m.robot_id, s) for m in sharing if (s := seq_of(m)) is not None}

    gap = range(-MAX_REPLY_GAP, MAX_REPLY_GAP + 1)

    def near(m: Memory) -> bool:
        s = seq_of(m)
        return s is not None and any((m.clip_index, m.robot_id, s + d) in lines for d in gap)

    shared = {m.node_id for m in sharing}
    return [m for m in evidence if m.node_id in shared or near(m)]
