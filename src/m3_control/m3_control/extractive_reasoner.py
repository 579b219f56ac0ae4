"""The embedded reasoner (no language model): searches built from the instruction, answers copied from evidence.

Searching. The loop's reference settings (search_clip top 2 clips at 0.5, ≤5 rounds) suit a model
that reads whole clips; this back-end ranks single memories by word overlap instead, so each of its
searches asks search_clip for the top 3 clips at threshold 0.3 and search_node for 30 nodes
(EXTRACTIVE_SEARCH). It searches the instruction, then each person it names (memory answers with
that person's entity and ids), then the ids learnt for those people, then the key words; "what is
X's id" / "which character is X" first get the character-id lookup the reference uses (loop
defaults: search_node, 20 nodes).

Answering. Every retrieved memory (entity ids rendered as the names memory knows) is scored by
the share of the instruction's content words it covers: the same word (after light stemming) counts
1, a related word (a small lexicon of everyday concepts: drinks, food, instruments, jobs, habits,
...) counts 0.5, and the named people count as words. Ties go to the memory that holds the kind of
thing asked for (a place for "where", a time for "when", a number for "how many", a person for
"who", a role for "what is X's job": answer_kinds), then to the latest clip (the current state), then
to the densest memory. The answer is the best memory; when that memory is a line asking the same
question, the next speaker's reply is appended; when it misses some of the question's words or the
kind of thing asked for, the memory that best supplies them is appended (questions that chain two
facts). A "who" answer from a line that says "you" names the person spoken to. Below half coverage
it says "I don't know". Plans come only from the instruction's own words plus places found in evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from m3_control.answer_kinds import (
    NOT_PEOPLE,
    RELATION_KIND_WORDS,
    ROLE_KIND_WORDS,
    ROOM_QUESTION_RE,
    addressee,
    answer_kind,
    holds_kind,
    kind_words,
    reply_to,
    role_of,
    where_it_happened,
)
from m3_control.instruction_plans import PLACE_RE, plan_from
from m3_control.irregular_verbs import IRREGULAR
from m3_control.loop import asks_for_id
from m3_control.memory_client import Memory, shown_text
from m3_control.names import ANY_ID, NAME_PATTERNS, names_from, with_names
from m3_control.reasoner import Answer, LoopState, Search
from m3_control.skills import is_question

STOP = set(
    "a an the is are was were be been am of to in on at by for with and or but not do does did done what who whom "
    "whose where when which why how please can could would should must might may shall you your me my i it its this "
    "that these those there here have has had any some about from into onto up down out over under again then than so "
    "if as just also now currently right his her their our him them he she they we us tell know will "
    "according".split()  # "according to the note": where it was said, not what it is about
)
# "I'll", "we're", "don't": a pronoun or auxiliary with its contraction says nothing about the topic.
CONTRACTION_RE = re.compile(r"(?:'(?:m|ll|ve|re|d)|n't)$")
# Words that say what kind of answer is wanted, not what it is about.
ROLE_WORDS = set(
    "name named called person people woman women man men girl boy lady guy someone somebody one room place".split()
)
COMMAND_VERBS = set("bring fetch get give hand take go navigate drive move look find show".split())
PHRASES = (
    (re.compile(r"\b(?:kept|keep|keeping|stay|stays|staying)\s+away\s+from\b", re.I), "avoid"),
    (re.compile(r"\bin the morning\b", re.I), "in the morning"),
)
# Everyday concepts: words of one group count as related (half a match).
RELATED_GROUPS = (
    "drink beverage coffee tea juice water milk beer wine soda latte espresso cocoa lemonade",
    "food eat meal snack peanut nut bread cake cookie chocolate pizza fruit apple banana rice pasta cheese egg "
    "fish meat dessert candy soup salad sandwich",
    "bake cook cake bread cookie pie muffin oven roast fry recipe",
    "avoid allergic allergy dislike hate",
    "instrument music piano guitar violin drum flute cello trumpet saxophone ukulele harp sing song",
    "job work profession occupation career nurse doctor engineer teacher photographer chef lawyer driver "
    "programmer developer artist writer farmer student",
    "nurse doctor hospital clinic patient medicine",
    "teacher school student class",
    "engineer software computer laptop code",
    "usual usually always often normally regularly habit every",
    "pet dog cat bird hamster rabbit parrot animal",
    "exercise sport jog run swim gym yoga tennis football soccer",
    "birthday party celebrate",
    "carry hold wear grab pick",  # having something in hand ("what was Bob carrying?" / "<face_2> picks up a cup")
)
# Parameters of this back-end's searches (documented above; model back-ends keep the loop's).
EXTRACTIVE_SEARCH = {"top_k": 3, "threshold": 0.3, "node_top_k": 30}
ID_QUESTION_RE = re.compile(
    r"^(?:what is the (?:character |entity |person |face |voice )?id of|what is|which character is)\s+"
    r"([A-Z][\w-]*)(?:'s (?:character |entity |person |face |voice )?id)?\s*\??$",
    re.IGNORECASE,
)


NOTHING_KNOWN = "I don't know: my memory holds nothing that answers this."
NOTHING_PLANNED = "My memory holds nothing about this; the plan comes from the instruction alone."


def id_lookup(instruction: str) -> str | None:
    """The name in "What is Bob's id?" / "Which character is Bob?"; None for questions that want names."""
    text = instruction.strip()
    match = ID_QUESTION_RE.match(text)
    return match.group(1) if match and asks_for_id(text) else None


def _stem(word: str) -> str:
    """Light stemming so that takes/taking/take, pictures/picture, moved/move, saw/seen/see, brought/bring meet
    ("did you see the cat?" meets "A cat is seen.")."""
    word = word.lower().replace("'s", "").strip("'")
    word = IRREGULAR.get(word, word)
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss") and not word.endswith("us"):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":  # stopp(ed) -> stop
        word = word[:-1]
    return word


RELATED: dict[str, set[str]] = {}
for _group in RELATED_GROUPS:
    _stems = {_stem(w) for w in _group.split()}
    for _s in _stems:
        RELATED.setdefault(_s, set()).update(_stems - {_s})


def _normalise_phrases(text: str) -> str:
    for pattern, replacement in PHRASES:
        text = pattern.sub(replacement, text)
    return text


def content_words(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9']+", _normalise_phrases(text).lower())
    return {
        _stem(w)
        for w in words
        if w not in STOP and w.replace("'s", "") not in STOP and not CONTRACTION_RE.search(w) and _stem(w)
    }


def question_words(instruction: str) -> set[str]:
    """What the instruction is about: content words without answer-kind words ("name of the woman")
    or the command verb of a request."""
    words = content_words(instruction) - {_stem(w) for w in ROLE_WORDS | kind_words(instruction)}
    if not is_question(instruction):
        first = re.findall(r"[a-z]+", instruction.lower())
        if first and first[0] in COMMAND_VERBS:
            words.discard(_stem(first[0]))
    return words


def person_names(instruction: str) -> list[str]:
    """Capitalised words that are not the first word: people and places the user names."""
    words = re.findall(r"[A-Za-z][\w-]*", instruction)
    return [w for w in words[1:] if w[0].isupper() and w.lower() not in STOP]


def is_bookkeeping(memory: Memory) -> bool:
    """Memories that only say who is who or who or what was seen: they answer no question but an id lookup.
    An object entity ("object_8 is an object: cat.") holds only its class, a word the question already says
    ("What is the cat afraid of?" was answered with it); when and where it was seen are episodic memories.
    A written-text entity holds its reading, which does answer ("What does the note say?")."""
    text = memory.text.strip()
    if memory.kind in ("face", "voice", "person", "object"):
        return True
    if text.startswith("Equivalence:") or re.fullmatch(r"\S+ is seen\.?", text):
        return True
    return bool(re.fullmatch(NAME_PATTERNS.format(id=ANY_ID) + r"\.?", text)) or bool(
        re.fullmatch(r"[A-Z][\w-]* (?:is called|is named) [A-Z][\w-]*\.?", text)
    )


@dataclass
class ExtractiveConfig:
    strong: float = 0.75  # answer at once when a memory covers this share of the instruction's content words
    weak: float = 0.5  # below this share at the end: "I don't know"
    related: float = 0.5  # what a related word (same everyday concept) counts for, a same word counting 1
    complement: float = 0.15  # least coverage of a memory appended to supply what the best one misses


@dataclass
class Scored:
    coverage: float  # share of the instruction's words covered (related words count `related`)
    memory: Memory
    text: str  # the memory with ids rendered as names
    exact: frozenset  # instruction words the memory has
    touched: frozenset  # instruction words it has or has a related word for
    kind: bool  # holds the kind of thing asked for
    density: float  # covered words per content word of the memory


class ExtractiveReasoner:
    """Reasoner without a language model (embedded default)."""

    quotes_memory = True  # answers quote memory with its names: the loop's answer_checks (for models) skip it

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
        names = person_names(instruction)
        out.extend(names)
        named = {n.lower() for n in names}
        learnt: dict[str, str] = {}  # one id per named person (memory expands a person to all its ids)
        for entity, name in sorted(names_from(list(evidence)).items(), key=lambda p: not p[0].startswith("person_")):
            if name.lower() in named:
                learnt.setdefault(name.lower(), entity)
        out.extend(f"<{entity}>" for entity in learnt.values())
        key = " ".join(w for w in re.findall(r"[\w'-]+", text) if w.lower() not in STOP)
        if key:
            out.append(key)
        unique: list[str] = []
        for query in out:
            if query.lower() not in (q.lower() for q in unique):
                unique.append(query)
        return unique

    def search(self, query: str) -> Search:
        if asks_for_id(query) and not query.startswith("<"):
            return Search(query=query)  # the reference character-id lookup, with the loop's settings
        return Search(query=query, **EXTRACTIVE_SEARCH)

    # --- judging evidence ----------------------------------------------------------------------
    def score(self, instruction: str, memory: Memory, names: dict[str, str]) -> Scored:
        wanted = question_words(instruction)
        text = with_names(shown_text(memory), names)
        have = content_words(text)
        # a memory about a named person's ids counts as naming them
        have |= {_stem(names[e]) for e in memory.entity_ids if e in names}
        region = memory.place.region if memory.place is not None else ""
        have |= content_words(region)  # where it happened ("what was said in the kitchen")
        kind_asked = answer_kind(instruction)
        kind = holds_kind(text, kind_asked, set(names.values()))
        kind = kind or bool(region and ROOM_QUESTION_RE.search(instruction))  # "in which room": its region
        asked = {n.lower() for n in person_names(instruction)}
        asked_stems = {_stem(n) for n in asked}
        if kind_asked == "role" and role_of(text, asked):
            have |= {_stem(w) for w in ROLE_KIND_WORDS}  # "<X> is a surgeon" answers "job", "profession", "do"
        if kind_asked == "relation" and kind and asked_stems and asked_stems <= have:
            have |= {_stem(w) for w in RELATION_KIND_WORDS}  # "Jonas is the husband of Lucia": both people, a relation
        exact = wanted & have
        mentioned = {w.lower() for w in re.findall(r"\b[A-Z][a-z]+\b", text)} - {w.lower() for w in NOT_PEOPLE}
        # people the memory is about whose names memory knows (an unnamed id may still be the asked person:
        # one human is often split over several ids)
        known = {names[e].lower() for e in memory.entity_ids if e in names}
        elsewhere = bool(known) and not known & asked
        # about somebody else: it cannot answer a question about these people (stems: "Tobias" is read "tobia")
        if asked_stems and not asked_stems & have and (mentioned - asked or elsewhere):
            exact = frozenset()
        related = {w for w in wanted - exact if RELATED.get(w, set()) & have} if exact else set()
        if wanted - asked_stems and not (exact | related) - asked_stems:
            exact, related = frozenset(), set()  # only the name in common: nothing about what is asked
        coverage = (len(exact) + self.config.related * len(related)) / len(wanted) if wanted else 0.0
        density = (len(exact) + len(related)) / max(1, len(have))
        return Scored(coverage, memory, text, frozenset(exact), frozenset(exact | related), kind, density)

    def support(self, instruction: str, memory: Memory, names: dict[str, str]) -> float:
        """Share of the instruction's content words a memory covers (related words count half)."""
        return self.score(instruction, memory, names).coverage

    def ranked_scores(self, state: LoopState) -> list[Scored]:
        names = names_from(state.evidence)
        candidates = [m for m in state.evidence if not is_bookkeeping(m)]
        scored = [self.score(state.asked, m, names) for m in candidates]
        # A command needs to know where things are: among equals, prefer memories that name a place.
        command = not is_question(state.asked)
        scored.sort(
            key=lambda s: (
                -round(s.coverage, 6),
                -s.kind,
                -(command and bool(PLACE_RE.search(s.text.lower()))),
                -s.memory.clip_index,  # the latest state of things
                -s.density,
                -s.memory.score,
            )
        )
        return scored

    def ranked(self, state: LoopState) -> list[tuple[float, Memory]]:
        return [(s.coverage, s.memory) for s in self.ranked_scores(state)]

    def decide(self, state: LoopState) -> Search | Answer:
        ranked = self.ranked_scores(state)
        best = ranked[0].coverage if ranked else 0.0
        lookup = id_lookup(state.asked)
        if lookup and not state.must_answer:
            found = self.id_answer(lookup, state)
            if found:
                return found
        done = {s.lower() for s in state.queries}
        remaining = [q for q in self.queries(state.asked, state.evidence) if q.lower() not in done]
        # the people named are searched before answering: their names decide which memories are theirs
        named = [n for n in person_names(state.asked) if n.lower() not in done]
        if best >= self.config.strong and not lookup and not named and not any(q.startswith("<") for q in remaining):
            return self.answer(state, ranked)
        if remaining and not state.must_answer:
            return self.search(remaining[0])
        if lookup:
            found = self.id_answer(lookup, state)
            if found:
                return found
        return self.answer(state, ranked)

    # --- answering -----------------------------------------------------------------------------
    def id_answer(self, name: str, state: LoopState) -> Answer | None:
        """ "Who is Alice" / "Alice's id": the entity a memory names Alice, quoted with that memory."""
        pattern = re.compile(NAME_PATTERNS.format(id=ANY_ID))
        for memory in sorted(state.evidence, key=lambda m: -m.score):
            for match in pattern.finditer(memory.text):
                if match.group(2).lower() == name.lower():
                    entity = match.group(1)
                    return Answer(text=f"{name} is <{entity}> (memory: {memory.text})", evidence_ids=(memory.node_id,))
        return None

    def answer(self, state: LoopState, ranked: list) -> Answer:
        ranked = [r if isinstance(r, Scored) else None for r in ranked]
        if any(r is None for r in ranked):
            ranked = self.ranked_scores(state)
        if not ranked or ranked[0].coverage < self.config.weak:
            plan = () if is_question(state.asked) else plan_from(state.asked, None)  # "go to the kitchen"
            return Answer(text=NOTHING_PLANNED if plan else NOTHING_KNOWN, plan=plan)
        best = ranked[0]
        parts = [best]
        # the best memory asks the same thing ("Where do you keep the aprons?"): its reply answers
        reply = reply_to(best.memory, state.evidence) if is_question(state.asked) else None
        if reply is not None:
            parts.append(self.score(state.asked, reply, names_from(state.evidence)))
        # what the best memory misses; the people named only pick memories, they are not what is asked
        named = {_stem(n) for n in person_names(state.asked)}
        missing = question_words(state.asked) - named - frozenset().union(*(p.touched for p in parts))
        need_kind = bool(answer_kind(state.asked)) and not any(p.kind for p in parts)
        if missing or need_kind:
            extra = self.complement(
                [r for r in ranked[1:] if r.memory not in (p.memory for p in parts)], best, missing, need_kind
            )
            if extra is not None:
                parts.append(extra)
        text = " ".join(p.text if p.text.rstrip().endswith((".", "!", "?", '"')) else p.text + "." for p in parts)
        to = addressee(best.memory, state.evidence) if answer_kind(state.asked) == "person" else None
        if to:  # "Then you can test the brakes": the doer is the person spoken to
            text += f" (said to {with_names(to, names_from(state.evidence))})"
        happened = where_it_happened(state.asked, best.memory, best.text)
        if happened:  # "In which room did Alice say ...?": the region of the robot's pose then
            text += f" {happened}"
        support = [s.memory.node_id for s in ranked if s.coverage >= max(self.config.weak, best.coverage - 0.25)][:3]
        for part in parts[1:]:
            if part.memory.node_id not in support:
                support.append(part.memory.node_id)
        plan = () if is_question(state.asked) else plan_from(state.asked, best.memory)
        return Answer(text=text, plan=plan, evidence_ids=tuple(support))

    def complement(self, others: list[Scored], best: Scored, missing: set, need_kind: bool) -> Scored | None:
        """The memory that best supplies what the best one misses (words, or the kind of thing asked);
        among equals, one about the same people as the best memory."""
        choice, key_best = None, (0, False)
        for other in others:
            if other.coverage < self.config.complement or other.text == best.text:
                continue
            if need_kind and not other.kind:
                continue
            gain = len(missing & other.exact) + (need_kind and other.kind)
            key = (gain, bool(set(other.memory.entity_ids) & set(best.memory.entity_ids)))
            if gain and key > key_best:
                choice, key_best = other, key
        return choice
