"""REP-155 (ROS4HRI) view of the persons the memory knows. Plain module (no rclpy).

Person ids are the memory's (person_2: persistent, as REP-155 asks). A person's face_id / voice_id
are the perception ids of this run (what perception publishes on /humans/faces/tracked and
/humans/voices/tracked), found through the graph's session map; a person not seen this run has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from m3_memory.graph.memory_graph import MemoryGraph
from m3_memory.graph.records import KIND_PERSON
from m3_memory.graph.tags import kind_of, seq_of
from m3_runtime.hri_ids import valid_id


@dataclass(frozen=True)
class PersonTopics:
    """The latched per-person values: /humans/persons/<person_id>/{name,face_id,voice_id}."""

    person_id: str
    name: str = ""
    face_id: str = ""
    voice_id: str = ""


@dataclass
class PersonsSnapshot:
    tracked: list[str] = field(default_factory=list)  # persons in the latest stored clip
    known: list[str] = field(default_factory=list)  # every person of the memory (canonical ids)
    persons: list[PersonTopics] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # merged person id -> surviving person id


def _ordered(ids: set[str]) -> list[str]:
    return sorted((i for i in ids if valid_id(i)), key=lambda i: (kind_of(i) or "", seq_of(i) if kind_of(i) else 0, i))


def persons_snapshot(graph: MemoryGraph, clip_entity_ids: list[str]) -> PersonsSnapshot:
    """The persons' state after a clip (clip_entity_ids: the clip's entities; [] at start-up)."""
    with graph.lock:
        known = {e for e, r in graph.entities.items() if r.kind == KIND_PERSON and graph.resolve(e) == e}
        latest: dict[tuple[str, str], str] = {}  # (person, kind) -> perception id seen last this run
        for perception_id, memory_id in graph.session_map.items():
            person = graph.person_of(memory_id)
            if person:
                latest[(person, kind_of(memory_id) or "")] = perception_id
        tracked = {p for e in clip_entity_ids if (p := graph.person_of(e))}
        persons = [
            PersonTopics(p, graph.entities[p].name, latest.get((p, "face"), ""), latest.get((p, "voice"), ""))
            for p in _ordered(known)
        ]
        aliases = {old: graph.resolve(old) for old in graph.aliases if kind_of(old) == KIND_PERSON and valid_id(old)}
    return PersonsSnapshot(_ordered(tracked), _ordered(known), persons, aliases)
