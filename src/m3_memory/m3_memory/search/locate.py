"""locate_entity: where and when an entity was last seen or heard, from its sightings (one per clip it was
observed in: first and last observation there, and where the robot was at the last one).

A person's sightings are those of every face and voice of that person (merged persons included), so
"where did you last see Bob" is answered from his face and "when did you last hear Bob" from his voice.
An object the detector tracked is found by its class too ("cup"): of the objects of that class, the one
seen last (by the as-of limit), so "take me to the cup" goes where the robot last saw a cup.
"""

from __future__ import annotations

from dataclasses import dataclass

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.memory_graph import MemoryGraph
from m3_memory.graph.records import KIND_OBJECT, KIND_PERSON, Sighting, label_of
from m3_memory.graph.tags import kind_of

MAX_SIGHTINGS = 100


@dataclass(frozen=True)
class Located:
    """locate_entity's answer: the entity found and its sightings, most recent first."""

    entity_id: str
    name: str
    sightings: list[Sighting]


def person_named(graph: MemoryGraph, name: str) -> str:
    """The person with this learnt name (case-insensitive); UNKNOWN_ENTITY when none or several have it."""
    wanted = name.strip().lower()
    with graph.lock:
        found = sorted(
            (r for r in graph.entities.values() if r.kind == KIND_PERSON and r.name.lower() == wanted),
            key=lambda r: r.seq,
        )
    if len(found) != 1:
        what = "no person is" if not found else f"{len(found)} persons are"
        raise MemoryApiError(errors.UNKNOWN_ENTITY, f"{what} called {name.strip()!r}")
    return found[0].entity_id


def object_labelled(graph: MemoryGraph, label: str, before_ns: int = 0) -> str:
    """The object of this class (case and spaces aside) seen last by before_ns (0 = no limit); UNKNOWN_ENTITY
    when memory saw none."""
    wanted = label_of(label)
    with graph.lock:
        last = {
            r.entity_id: max(
                (s.last_ns for s in graph.sightings.get(r.entity_id, []) if not before_ns or s.last_ns <= before_ns),
                default=-1,
            )
            for r in graph.entities.values()
            if r.kind == KIND_OBJECT and r.label == wanted
        }
    seen = [(stamp, entity_id) for entity_id, stamp in last.items() if stamp >= 0]
    if not seen:
        raise MemoryApiError(errors.UNKNOWN_ENTITY, f"no object of the class {wanted!r} was seen")
    return max(seen)[1]


def locate(graph: MemoryGraph, entity_id: str, before_ns: int = 0, limit: int = 1) -> Located:
    """The entity's `limit` most recent sightings that ended by before_ns (0 = no limit)."""
    if not 1 <= int(limit) <= MAX_SIGHTINGS:
        raise MemoryApiError(errors.INVALID_ARGUMENT, f"max_sightings must be in 1..{MAX_SIGHTINGS}, got {limit}")
    entity_id = entity_id.strip().strip("<>")
    with graph.lock:
        canonical = graph.resolve(entity_id)
        record = graph.entities.get(canonical)
        if record is None:
            raise MemoryApiError(errors.UNKNOWN_ENTITY, f"no entity has the id {entity_id!r}")
        if record.kind == KIND_PERSON:
            observed = [e for e in graph.sightings if kind_of(e) != KIND_PERSON and graph.person_of(e) == canonical]
        else:
            observed = [canonical]
        sightings = [s for e in observed for s in graph.sightings.get(e, []) if not before_ns or s.last_ns <= before_ns]
        name = graph.display_name(canonical)
    sightings.sort(key=lambda s: (-s.last_ns, s.entity_id))
    return Located(canonical, name, sightings[: int(limit)])
