"""The names one goal learns for the entity ids it retrieves, written the way the asker spells them, and
an answer's ids replaced by those names.

Why apart from the loop (m3_control.loop): the loop decides when to search and answer; this is what
it knows of who is who along the way (LoopState.names, .unnamed, .people, .spellings), read from the
retrieved memories and from memory's get_names (names.py reads the memories' texts).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from m3_control.answer_checks import evidence_ids
from m3_control.memory_client import (
    Clip,
    Memory,
    MemoryClient,
    MemoryQueryRejected,
    MemoryUnavailable,
    entity_names,
)
from m3_control.names import ANSWER_ID_RE, UNNAMED, asker_spellings, names_from, respelt
from m3_control.reasoner import LoopState
from m3_memory.graph.name_spellings import CAPITALISED_RE


def _name_ids(
    state: LoopState, ids: set[str], memory: MemoryClient, said: dict[str, str], carried: dict[str, str] | None = None
) -> None:
    """Learn names for ids not seen yet: those the retrieved memories carry (search results name their
    entities), the others in one lookup (memory's get_names; the first one of a goal also lists every
    named person, for the answer check); memory's current name first, then what a retrieved "<face_1>
    is named Alice" says (said). Why: a get_entity per id cost a round 80 ms at 100k memories, and over
    the service transport each lookup is a ROS call."""
    carried = carried or {}
    new = ids - state.names.keys() - state.unnamed
    missing = sorted(new - carried.keys())
    found: dict[str, str] = {}
    if missing or state.people is None:
        found = entity_names(memory, missing, people=state.people is None)
    if state.people is None:
        state.people = {entity_id: name for entity_id, name in found.items() if name}
    for entity_id in sorted(new):
        name = carried.get(entity_id) or found.get(entity_id) or said.get(entity_id)
        if name:
            state.names[entity_id] = name
        else:
            state.unnamed.add(entity_id)


def learn_names(state: LoopState, memories: list[Memory], memory: MemoryClient) -> None:
    """Names for the entity ids of newly retrieved memories. Why: search_node returns its texts with
    ids, and a small model shown "<voice_2> says" answers with the id or cannot join it to the person."""
    carried = {
        entity_id: name
        for m in memories
        if m.entity_names is not None
        for entity_id, name in zip(m.entity_ids, m.entity_names, strict=True)
    }
    _name_ids(state, evidence_ids(memories), memory, names_from(memories), carried)


def in_asker_spelling(state: LoopState, clips: list[Clip], nodes: list[Memory]) -> tuple[list[Clip], list[Memory]]:
    """The retrieved memories, and the names learnt, with each name the instruction spells differently
    from memory written the instruction's way (names.asker_spellings: an answer about "Yusuf" that memory
    heard as "Yosuf" says "Yusuf")."""
    texts = itertools.chain((m.text for clip in clips for m in clip.memories), (m.text for m in nodes))
    words = itertools.chain(state.names.values(), (w for text in texts for w in CAPITALISED_RE.findall(text)))
    state.spellings.update(asker_spellings(state.instruction, words, (state.people or {}).values()))
    if not state.spellings:
        return clips, nodes
    state.names = {entity: respelt(name, state.spellings) for entity, name in state.names.items()}

    def fixed(memories):
        return [replace(m, text=respelt(m.text, state.spellings)) for m in memories]

    return [replace(c, memories=tuple(fixed(c.memories))) for c in clips], fixed(nodes)


def resolved(state: LoopState, text: str, memory: MemoryClient) -> str:
    """An answer with its ids replaced by the names memory knows, UNNAMED where it knows none (an id
    means nothing to a person; robot code has the ids in the result's evidence)."""
    ids = {m.group(1) or m.group(2) for m in ANSWER_ID_RE.finditer(text)} - state.names.keys() - state.unnamed
    if ids:  # no call for an answer without new ids (a goal that never searched must not wait on memory)
        try:
            _name_ids(state, ids, memory, names_from(state.evidence))
        except (MemoryUnavailable, MemoryQueryRejected):
            pass  # names learnt so far and the evidence's: an id without one still becomes UNNAMED
    return ANSWER_ID_RE.sub(lambda m: state.names.get(m.group(1) or m.group(2), UNNAMED), text)
