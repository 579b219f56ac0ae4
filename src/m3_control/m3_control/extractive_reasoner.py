"""The embedded reasoner (no language model): searches built from the instruction, answers copied from evidence.

It searches the instruction itself, then its key phrase, then each named person, and for
"what is X's id" / "which character is X" the character-id lookup the reference uses. It answers with the
retrieved memory that covers most of the instruction's content words (people's ids counted under
the names memory gives them), citing that memory, and says "I don't know" when no memory covers
enough. Plans come only from the instruction's own words plus places found in evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from m3_control.loop import asks_for_id
from m3_control.memory_client import ENTITY_ID_RE, Memory
from m3_control.reasoner import Answer, LoopState, Search
from m3_control.skills import is_question

STOP = set(
    "a an the is are was were be been of to in on at by for with and or but not do does did done what who whom whose "
    "where when which why how please can could would you your me my i it its this that these those there here have "
    "has had any some about from into onto up down out over under again then than so if as just also".split()
)
NAME_PATTERNS = (
    r"<?({id})>?(?:'s name is| is named| is called| introduced (?:himself|herself|themselves|themself) as| is) "
    r"([A-Z][a-z]+)"
)
ID_QUESTION_RE = re.compile(
    r"^(?:what is the (?:character |entity |person |face |voice )?id of|what is|which character is)\s+"
    r"([A-Z][\w-]*)(?:'s (?:character |entity |person |face |voice )?id)?\s*\??$",
    re.IGNORECASE,
)


def id_lookup(instruction: str) -> str | None:
    """The name in "What is Bob's id?" / "Which character is Bob?"; None for questions that want names."""
    text = instruction.strip()
    match = ID_QUESTION_RE.match(text)
    return match.group(1) if match and asks_for_id(text) else None


PLACE_RE = re.compile(
    r"\b(?:in|on|at|under|inside|into|onto|near|behind|beside|next to)\s+"
    r"(the\s+[a-z]+(?:\s+(?:of|in|on)\s+the\s+[a-z]+)?)"
)


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9']+", text.lower().replace("'s", "")) if w not in STOP}


def person_names(instruction: str) -> list[str]:
    """Capitalised words that are not the first word: people and places the user names."""
    words = re.findall(r"[A-Za-z][\w-]*", instruction)
    return [w for w in words[1:] if w[0].isupper() and w.lower() not in STOP]


def names_from(evidence: list[Memory]) -> dict[str, str]:
    """Entity id -> name, from memories such as "<face_1> is named Alice"."""
    names: dict[str, str] = {}
    pattern = re.compile(NAME_PATTERNS.format(id=r"(?:face|voice|person|character)_\d+"))
    for memory in evidence:
        for match in pattern.finditer(memory.text):
            names.setdefault(match.group(1), match.group(2))
    return names


def with_names(text: str, names: dict[str, str]) -> str:
    return ENTITY_ID_RE.sub(lambda m: names.get(m.group(1) or m.group(2), m.group(0)), text)


@dataclass
class ExtractiveConfig:
    strong: float = 0.75  # answer at once when a memory covers this share of the instruction's content words
    weak: float = 0.5  # below this share at the end: "I don't know"


class ExtractiveReasoner:
    """Reasoner without a language model (embedded default)."""

    def __init__(self, config: ExtractiveConfig | None = None) -> None:
        self.config = config or ExtractiveConfig()

    # --- searching -----------------------------------------------------------------------------
    def queries(self, instruction: str, evidence: list[Memory] = ()) -> list[str]:
        """Search queries in the order they are tried; ids learnt for named people are searched next."""
        text = re.sub(r"^(please|can you|could you|would you)\s+", "", instruction.strip(), flags=re.IGNORECASE)
        out: list[str] = []
        lookup = id_lookup(text)
        if lookup:
            out.append(f"What is the character id of {lookup}")
        out.append(text)
        named = {n.lower() for n in person_names(instruction)}
        out.extend(f"<{entity}>" for entity, name in names_from(list(evidence)).items() if name.lower() in named)
        key = " ".join(w for w in re.findall(r"[\w'-]+", text) if w.lower() not in STOP)
        if key:
            out.append(key)
        for name in person_names(instruction):
            out.append(f"What is the character id of {name}")
            out.append(name)
        unique: list[str] = []
        for query in out:
            if query.lower() not in (q.lower() for q in unique):
                unique.append(query)
        return unique

    # --- judging evidence ----------------------------------------------------------------------
    def support(self, instruction: str, memory: Memory, names: dict[str, str]) -> float:
        """Share of the instruction's content words a memory covers; 0 when it misses every named person."""
        wanted = content_words(instruction)
        if not wanted:
            return 0.0
        text = with_names(memory.text, names)
        have = content_words(text)
        named = [n.lower() for n in person_names(instruction)]
        if named and not any(n in have for n in named):
            return 0.0
        return len(wanted & have) / len(wanted)

    def ranked(self, state: LoopState) -> list[tuple[float, Memory]]:
        names = names_from(state.evidence)
        # A memory that only says "<face_2> is named Bob" answers no question about Bob but his id.
        naming = re.compile(NAME_PATTERNS.format(id=r"(?:face|voice|person|character)_\d+") + r"\.?$")
        candidates = [m for m in state.evidence if not naming.fullmatch(m.text.strip())]
        scored = [(self.support(state.instruction, m, names), m) for m in candidates]
        # A command needs to know where things are: among equals, prefer memories that name a place.
        command = not is_question(state.instruction)
        scored.sort(key=lambda p: (-p[0], -(command and bool(PLACE_RE.search(p[1].text.lower()))), -p[1].score))
        return scored

    def decide(self, state: LoopState) -> Search | Answer:
        ranked = self.ranked(state)
        best = ranked[0][0] if ranked else 0.0
        lookup = id_lookup(state.instruction)
        if lookup and not state.must_answer:
            found = self.id_answer(lookup, state)
            if found:
                return found
        if best >= self.config.strong and not lookup:
            return self.answer(state, ranked)
        remaining = [
            q
            for q in self.queries(state.instruction, state.evidence)
            if q.lower() not in (s.lower() for s in state.queries)
        ]
        if remaining and not state.must_answer:
            return Search(query=remaining[0])
        if lookup:
            found = self.id_answer(lookup, state)
            if found:
                return found
        return self.answer(state, ranked)

    # --- answering -----------------------------------------------------------------------------
    def id_answer(self, name: str, state: LoopState) -> Answer | None:
        """ "Who is Alice" / "Alice's id": the entity a memory names Alice, quoted with that memory."""
        pattern = re.compile(NAME_PATTERNS.format(id=r"(?:face|voice|person|character)_\d+"))
        for memory in sorted(state.evidence, key=lambda m: -m.score):
            for match in pattern.finditer(memory.text):
                if match.group(2).lower() == name.lower():
                    entity = match.group(1)
                    return Answer(text=f"{name} is <{entity}> (memory: {memory.text})", evidence_ids=(memory.node_id,))
        return None

    def answer(self, state: LoopState, ranked: list[tuple[float, Memory]]) -> Answer:
        if not ranked or ranked[0][0] < self.config.weak:
            return Answer(text="I don't know: my memory holds nothing that answers this.")
        best_score, best = ranked[0]
        support = [m.node_id for s, m in ranked if s >= max(self.config.weak, best_score - 0.25)][:3]
        plan = () if is_question(state.instruction) else self.plan(state.instruction, best)
        return Answer(text=best.text, plan=plan, evidence_ids=tuple(support))

    def plan(self, instruction: str, best: Memory) -> tuple:
        """Steps from the instruction's verb; a place for the object may come from the evidence."""
        text = instruction.strip().rstrip(".!?")
        text = re.sub(r"^(please|can you|could you|would you)\s+", "", text, flags=re.IGNORECASE)
        place = PLACE_RE.search(best.text.lower())
        where = place.group(1) if place else ""
        bring = re.match(r"(?:bring|fetch|get|give|hand)\s+(me|\w+)\s+(?:the\s+|my\s+|his\s+|her\s+)?(.+)$", text, re.I)
        if bring:
            person, thing = bring.group(1), bring.group(2)
            steps = []
            if where:
                steps.append({"skill": "navigate_to", "target": where, "arguments": {}})
            steps.append({"skill": "pick", "target": thing, "arguments": {"from": where} if where else {}})
            steps.append({"skill": "navigate_to", "target": person, "arguments": {}})
            steps.append({"skill": "hand_over", "target": person, "arguments": {"object": thing}})
            return tuple(steps)
        go = re.match(r"(?:go|navigate|drive|move)\s+to\s+(.+)$", text, re.I)
        if go:
            return ({"skill": "navigate_to", "target": go.group(1), "arguments": {}},)
        look = re.match(r"look\s+at\s+(.+)$", text, re.I)
        if look:
            return ({"skill": "look_at", "target": look.group(1), "arguments": {}},)
        return ()
