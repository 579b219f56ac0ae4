"""Names for entity ids: what memory says about who is who, used by every back-end.

Why one module: the extractive reasoner ranks memories with ids rendered as names, the model
back-ends show the model memories with names instead of ids, the loop replaces any id left in an
answer by the person's name (goal_names.resolved), and the answer checks know who the evidence names.
All of them read names the same way: from memories such as "<face_1> is named Alice", from the
entities search_node returns ("<person_2> is called Bob; faces and voices: face_3, voice_2"), and
from memory's get_names (memory_client.entity_names, that goal_names calls for the loop: one lookup for many ids;
a ROS call per id cost a round tens of milliseconds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from m3_control.memory_client import ENTITY_ID_RE, Memory
from m3_memory.graph.name_spellings import CAPITALISED_RE, spelling_in

ANY_ID = r"(?:face|voice|person|character)_\d+"
NAME_PATTERNS = (
    r"<?({id})>?(?:'s name is| is named| is called| introduced (?:himself|herself|themselves|themself) as| is) "
    r"([A-Z][a-z]+)"
)
NAME_RE = re.compile(NAME_PATTERNS.format(id=ANY_ID))
PERSON_HIT_RE = re.compile(rf"^<({ANY_ID})> is called ([A-Z][\w-]*); faces and voices: (.*)$")
MEMBER_HIT_RE = re.compile(rf"^<({ANY_ID})> of <({ANY_ID})>(?: \(([A-Z][\w-]*)\))?")
# In answers a model may also write an id without its brackets ("person_3").
ANSWER_ID_RE = re.compile(rf"<({ANY_ID})>|\b({ANY_ID})\b")
# Capitalised, and never a person's name: the days and months an answer states as facts
CALENDAR_WORDS = set(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december".split()
)
# Capitalised words that are not names (sentence starts, titles of time), whatever memory holds.
NOT_NAMES = CALENDAR_WORDS | set(
    "i a an the this that these those it its he she they we you his her their our your my me him them us there here "
    "someone somebody nobody noone none no yes everyone everybody anyone anybody both all each one two three some "
    "sorry unfortunately according based since because as after before when while then also and but or so if in on "
    "at by for from with without about to of memory robot person people ok okay "
    "well what who whom whose where which why how mr mrs ms dr".split()
)
UNNAMED = "someone whose name I don't know"  # an id or unsupported name in an answer that memory has no name for


def names_from(evidence: list[Memory]) -> dict[str, str]:
    """Entity id -> name, from memories such as "<face_1> is named Alice" and from the entities
    search_node returns ("<person_2> is called Bob; faces and voices: face_3, voice_2")."""
    names: dict[str, str] = {}
    for memory in evidence:
        hit = PERSON_HIT_RE.match(memory.text.strip())
        if hit:
            for entity in [hit.group(1), *re.findall(ANY_ID, hit.group(3))]:
                names.setdefault(entity, hit.group(2))
            continue
        hit = MEMBER_HIT_RE.match(memory.text.strip())
        if hit:
            if hit.group(3):
                names.setdefault(hit.group(1), hit.group(3))
                names.setdefault(hit.group(2), hit.group(3))
            continue
        for match in NAME_RE.finditer(memory.text):
            names.setdefault(match.group(1), match.group(2))
    return names


def with_names(text: str, names: dict[str, str], pattern: re.Pattern = ENTITY_ID_RE) -> str:
    """Entity ids in text replaced by the names given (ids without a name stay)."""
    return pattern.sub(lambda m: names.get(m.group(1) or m.group(2), m.group(0)), text)


def asker_spellings(instruction: str, memory_words: Iterable[str], people: Iterable[str]) -> dict[str, str]:
    """Memory's spelling -> the instruction's, for each name the instruction writes differently from
    memory (m3_memory.graph.name_spellings: "Yosuf", as speech recognition heard it, is the "Yusuf" the
    user asks about). Why: an answer in the user's spelling is the one they recognise, and a reasoner
    (a small model, or the extractive scorer) joins the question's name to the memories only so. A name
    the instruction writes as a person memory knows by exactly that name is theirs: nothing is respelt
    to it (in a household with a Maria and a Mario, "Mario" stays Mario's)."""
    known = {p.lower() for p in people}
    asked = {
        m.group(1)
        for m in CAPITALISED_RE.finditer(instruction)
        if m.group(1).lower() not in NOT_NAMES and m.group(1).lower() not in known
    }
    if not asked:
        return {}  # memory_words (lazy in the loop) are not read
    words = {w for w in memory_words if w not in asked}
    return {w: q for w in words if (q := spelling_in(w, asked))}


def respelt(text: str, spellings: dict[str, str]) -> str:
    """text with each word of `spellings` (whole, capitalised) written the instruction's way."""
    if not spellings:
        return text
    return CAPITALISED_RE.sub(lambda m: spellings.get(m.group(1), m.group(1)), text)
