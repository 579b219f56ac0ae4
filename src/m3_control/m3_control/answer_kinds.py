"""What kind of thing a question asks for, and which memories hold it (for the extractive reasoner).

"When ..." wants a time, "Where ..." a place, "How many ..." a number, "Who ..." a person, and "What is
X's job?" / "What does X do?" a role. A memory that holds the kind asked for is preferred among
equals, and supplies what the best memory lacks. Roles are read from the shape of a statement ("<X>
is a surgeon", "<X> is the new apprentice mechanic", "works as ...") rather than from a list of jobs:
households have jobs no list foresees.

Replies: a memory that is itself a question ("Where do you keep the aprons?") does not answer it; the
line spoken next, by someone else, in the same clip does (a question and its answer are a pair in
conversation). `reply_to` finds that line among the evidence. A line that says "you" ("Then you can
test the brakes") is about the person spoken to: `addressee` finds whom.
"""

from __future__ import annotations

import re

from m3_control.irregular_verbs import base_form
from m3_control.memory_client import ENTITY_ID_RE, Memory
from m3_control.skills import question_core

TIME_RE = re.compile(
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekends?|today|tomorrow|tonight|yesterday|"
    r"morning|evening|afternoon|night|noon|midnight|january|february|march|april|june|july|august|september|"
    r"october|november|december|o'clock|\d{1,2}(?::\d\d)?\s*(?:am|pm)|(?:next|last|this) (?:week|month|year)|"
    r"at (?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,2}))\b",
    re.IGNORECASE,
)
NUMBER_RE = re.compile(
    r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|dozen|twenty|hundred|few|several)\b",
    re.IGNORECASE,
)
ANSWER_PLACE_RE = re.compile(
    r"\b(?:(?:in|on|at|under|inside|into|onto|near|behind|beside|by|next to)\s+(?:the|my|his|her|their|our|your|a)|"
    r"to\s+(?:my|his|her|their|our|your))\s+[a-z]+",
    re.IGNORECASE,
)
NOT_PEOPLE = set("The A An I It Its This That These Those There Here He She They We You Yes No Equivalence".split())
# "In which room did ...?", "What place ...": the place where something happened, not one its words name
# A memory of what the camera showed (m3_memory's memorize/seen.py and holders.py): "seen in the kitchen".
SEEN_RE = re.compile(r"\b(?:is|are) seen\b|\b(?:picks up|puts down|holds) an? \w|\bnote or sign says:")
# What the camera read (m3_memory's memorize/seen.py), and the questions that ask for it: "What does the note on
# the fridge say?", "What did the sign read?", "What is written on the board?" (a said line that mentions a
# note is not what a note says).
WRITTEN_RE = re.compile(r"\bnote or sign says:")
WRITTEN_QUESTION_RE = re.compile(
    r"\bwhat (?:is|was|were) (?:written|printed)\b"
    r"|^what (?:does|did|do)\b.*\b(?:note|sign|notice|label|poster|card|board|letter|screen)s?\b.*\b(?:say|read|tell)\b"
)
ROOM_QUESTION_RE = re.compile(r"\b(?:which|what) (?:room|place|part of the (?:house|home|flat|building))\b", re.I)
# "What is X's job?", "What does X do for a living?", "What is the profession of ...?"
ROLE_QUESTION_RE = re.compile(
    r"\b(?:job|profession|occupation|career|line of work|for a living|role)\b|^what does .+ do\s*\??$", re.IGNORECASE
)
# The words of a role question that name the kind, not the person: a role statement covers them.
ROLE_KIND_WORDS = ("job", "profession", "occupation", "career", "work", "living", "role", "do")
# "<X> is a surgeon", "X is the new apprentice mechanic", "I'm a nurse", "works as a driver", "works at the bank"
# family and social relations are who someone is to another person, not their job
RELATION_WORDS = (
    "sister|brother|mother|father|mum|mom|dad|son|daughter|wife|husband|partner|friend|cousin|aunt|uncle|niece|"
    "nephew|grandmother|grandfather|grandma|grandpa|grandson|granddaughter|neighbou?r|boyfriend|girlfriend|"
    "fianc[eé]e?|twin|roommate|flatmate"
)
ROLE_STATEMENT_RE = re.compile(
    r"\b(?:is|am|I'm)\s+(?:a|an|the)\s+(?!(?:bit|lot|little|one|same|only|first|last|best|"
    + RELATION_WORDS
    + r")\b)[a-z]|\bworks?\s+(?:as|at|in|for)\s",
    re.IGNORECASE,
)
# "How is X related to Y?", "What relation is X to Y?", "What is X's relationship with Y?": a family or social
# relation answers ("Jonas is the husband of Lucia"), and the question's own words for it are no part of what
# it is about.
RELATION_KIND_WORDS = ("related", "relation", "relationship")
RELATION_QUESTION_RE = re.compile(rf"\b(?:{'|'.join(RELATION_KIND_WORDS)})\b", re.IGNORECASE)
RELATION_RE = re.compile(rf"\b(?:{RELATION_WORDS})s?\b", re.IGNORECASE)
QUOTED_RE = re.compile(r'\bsays:\s*"(.*)"\s*$', re.DOTALL)
SEQ_RE = re.compile(r"_(\d+)$")
TIME_KIND_RE = re.compile(r"^(?:what|which) (time|day|date)\b")
MAX_REPLY_GAP = 4  # node ids between a question and its reply (the question's own derived memories lie between)


def answer_kind(instruction: str) -> str:
    """What the instruction asks for: "time", "place", "number", "person", "relation", "role", "written" or ""."""
    text = question_core(instruction)
    if re.match(r"^when\b", text) or TIME_KIND_RE.match(text):
        return "time"
    if re.match(r"^where\b", text) or ROOM_QUESTION_RE.search(text):
        return "place"
    if re.match(r"^how (?:many|much|old|long)\b", text):
        return "number"
    if re.match(r"^(?:who|whom|whose)\b|^which (?:person|one|of them)\b", text) or re.search(r"\bname of\b", text):
        return "person"
    if RELATION_QUESTION_RE.search(text):
        return "relation"
    if ROLE_QUESTION_RE.search(text):
        return "role"
    if WRITTEN_QUESTION_RE.search(text):
        return "written"
    return ""


def kind_words(instruction: str) -> set[str]:
    """The words that only name the kind of answer asked for: "time" in "(At) what time does the shop open?",
    "day" in "Which day ...?". Why: they are no part of what the question is about, and a memory stating the
    time ("Dentist Wednesday 4 pm") does not say the word."""
    match = TIME_KIND_RE.match(question_core(instruction))
    return {match.group(1)} if match else set()


def holds_kind(text: str, kind: str, names: set[str]) -> bool:
    """Whether a memory's text (ids rendered as names) holds the kind of thing asked for."""
    if kind == "time":
        return bool(TIME_RE.search(text))
    if kind == "place":
        return bool(ANSWER_PLACE_RE.search(text))
    if kind == "number":
        return bool(NUMBER_RE.search(text))
    if kind == "role":
        return bool(ROLE_STATEMENT_RE.search(text))
    if kind == "relation":
        return bool(RELATION_RE.search(text))
    if kind == "written":
        return bool(WRITTEN_RE.search(text))
    if kind == "person":
        capitalised = set(re.findall(r"\b[A-Z][a-z]+\b", text)) - NOT_PEOPLE
        return bool(
            ENTITY_ID_RE.search(text) or capitalised or any(re.search(rf"\b{re.escape(n)}\b", text) for n in names)
        )
    return False


def role_of(text: str, people: set[str]) -> bool:
    """Whether text states the role of one of `people` (lower-case names; empty: of anyone): a role
    statement whose subject, the words before it, names them ("Emma is a chef", 'Emma says: "I'm a
    chef"'), not "Linda is a pilot, like Emma"."""
    match = ROLE_STATEMENT_RE.search(text)
    if match is None:
        return False
    subject = text[: match.start()].lower()
    return not people or any(re.search(rf"\b{re.escape(p)}\b", subject) for p in people)


def _quoted(memory: Memory) -> str | None:
    match = QUOTED_RE.search(memory.text) if memory.kind == "episodic" else None
    return match.group(1).strip() if match else None


def seq_of(memory: Memory) -> int | None:
    """A memory's place in the order memories were stored (the number of its node id), or None."""
    match = SEQ_RE.search(memory.node_id)
    return int(match.group(1)) if match else None


def asks_back(memory: Memory) -> bool:
    """Whether a memory is a line of speech that asks a question (it cannot be an answer itself)."""
    said = _quoted(memory)
    return bool(said) and said.rstrip('."').endswith("?")


def reply_to(question: Memory, evidence: list[Memory]) -> Memory | None:
    """The line said right after `question` in the same clip, by another speaker; None when the evidence
    does not hold it (or the next line there is the same speaker's)."""
    seq = seq_of(question)
    if seq is None or not asks_back(question):
        return None
    following = [
        m
        for m in evidence
        if m.clip_index == question.clip_index
        and m.node_id != question.node_id
        and _quoted(m) is not None
        and (s := seq_of(m)) is not None
        and seq < s <= seq + MAX_REPLY_GAP
    ]
    if not following:
        return None
    reply = min(following, key=seq_of)
    # the speaker is what precedes "says:" (an id, or a name); the entity ids may include people addressed
    same_speaker = reply.text.split(" says:", 1)[0] == question.text.split(" says:", 1)[0]
    return None if same_speaker else reply


# "you can test the brakes", "will you drive me", "you'll": the doer is the person spoken to
YOU_DO_RE = re.compile(r"\b(?:you|you'll|you're)\b", re.IGNORECASE)
I_DO_RE = re.compile(r"\b(?:I|I'm|I'll|I've|I'd)\b")  # "I'm vegetarian, you know": the speaker's own
VOCATIVE_RE = re.compile(r"^([A-Z][a-z]+),\s|,\s([A-Z][a-z]+)[.!?]?$")
# "can you bring", "then you can make", "you'll drive": the verb the one spoken to is to do
LISTENER_VERB_RE = re.compile(
    r"\byou(?:'ll)?\s+(?:(?:can|could|will|would|should|must|may|might|please|just)\s+)*([a-z]+)", re.IGNORECASE
)


def _speaker(memory: Memory) -> str:
    return memory.text.split(" says:", 1)[0]


def tells_listener_to(line: Memory, verb: str) -> bool:
    """Whether a line asks or tells the one spoken to to do `verb` ("Farid, can you bring the ladder?", "Then you
    can make the croissants") and says nothing of its speaker ("I"). Then its speaker is not who does it."""
    said = _quoted(line)
    if not said or I_DO_RE.search(said):
        return False
    return any(base_form(m.group(1)) == base_form(verb) for m in LISTENER_VERB_RE.finditer(said))


def addressee(line: Memory, evidence: list[Memory]) -> str | None:
    """Whom a line that says "you" speaks to: the name it calls ("Chloe, order more tubes"), else the
    other speaker of the lines just before or after it in the same clip; None when unclear. Why: in
    "Who tests the brakes?" answered by 'Tariq says: "Then you can test the brakes"', the one who
    tests them is the person Tariq spoke to, not Tariq."""
    said = _quoted(line)
    seq = seq_of(line)
    if not said or seq is None or not YOU_DO_RE.search(said) or I_DO_RE.search(said):
        return None
    called = VOCATIVE_RE.search(said)
    if called and (name := called.group(1) or called.group(2)) not in NOT_PEOPLE:
        return name
    near = [
        m
        for m in evidence
        if m.clip_index == line.clip_index
        and _quoted(m) is not None
        and (s := seq_of(m)) is not None
        and 0 < abs(s - seq) <= MAX_REPLY_GAP
        and _speaker(m) != _speaker(line)
    ]
    if not near:
        return None
    before = [m for m in near if seq_of(m) < seq]
    closest = max(before, key=seq_of) if before else min(near, key=seq_of)
    return _speaker(closest)


def where_it_happened(question: str, memory: Memory, text: str) -> str:
    """The region a memory was made in, as a note for a place question ("(said in the kitchen)"): always for
    "in which room ...?", for "where ...?" only when the memory's words name no place themselves (then the
    words are the answer: "the keys are in the drawer"); "" when memory has no region for it."""
    region = memory.place.region if memory.place is not None else ""
    if not region or answer_kind(question) != "place":
        return ""
    seen = SEEN_RE.search(text)  # a seen line names no place ("seen near a cup": near the people)
    if not ROOM_QUESTION_RE.search(question) and not seen and ANSWER_PLACE_RE.search(text):
        return ""
    how = "said" if _quoted(memory) is not None else "seen" if seen else "noted"
    return f"({how} in the {region})"
