"""get_entity, get_names and get_stats: what the memory holds about one entity, the names of many, its counts."""

from __future__ import annotations

from collections.abc import Iterable

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.memory_graph import MemoryGraph
from m3_memory.graph.records import KIND_FACE, KIND_OBJECT, KIND_PERSON, KIND_TEXT, KIND_VOICE
from m3_memory.graph.tags import kind_of
from m3_memory.search.search_types import EntityView, Stats


def entity_view(graph: MemoryGraph, entity_id: str) -> EntityView:
    """An entity with its aliases, members, memories (newest first) and best crop (get_entity): a person's
    best face, or an object's most confident sighting."""
    entity_id = (entity_id or "").strip().strip("<>")
    if not entity_id:
        raise MemoryApiError(errors.EMPTY_QUERY, "entity_id is empty")
    with graph.lock:
        canonical = graph.resolve(entity_id)
        record = graph.entities.get(canonical)
        if record is None:
            raise MemoryApiError(errors.UNKNOWN_ENTITY, f"no entity has the id {entity_id!r}")
        aliases = graph.aliases_of(canonical)
        if record.kind == KIND_PERSON:
            members = graph.members_of(canonical)
            mention_ids = [canonical, *aliases, *members]
        else:
            members = [graph.resolve(record.person_id)] if record.person_id else []  # things have no person
            mention_ids = [canonical]
        memory_ids = {n for e in mention_ids for n in graph.entity_memories.get(e, [])}
        memory_ids = sorted(memory_ids, key=lambda n: -graph.text[n].seq)
        crop_from = [m for m in members if kind_of(m) == KIND_FACE] if record.kind == KIND_PERSON else [canonical]
    crop = b""
    best = -2.0
    for face_id in crop_from:  # outside the lock: a crop may come over the network (Milvus)
        face = graph.entities.get(face_id)
        if face is not None and face.crop_score > best:
            data = graph.backend.entity_crop(face_id)
            if data:
                crop, best = data, face.crop_score
    return EntityView(
        canonical, record.kind, graph.display_name(canonical), aliases, members, record.observation_count,
        record.first_clip, record.last_clip, record.first_ns, record.last_ns, memory_ids, crop, record.label,
    )  # fmt: skip


def entity_names(graph: MemoryGraph, entity_ids: Iterable[str], people: bool = False) -> dict[str, str]:
    """Id (brackets stripped) -> learnt name of its person ("" when none) for each id memory knows, unknown ids left
    out, and with people every named person (get_names). Why: the control loop names every id of a
    round at once; get_entity per id builds a whole view (memories, face crop) for one name."""
    names: dict[str, str] = {}
    with graph.lock:
        for raw in entity_ids:
            entity_id = (raw or "").strip().strip("<>")
            if entity_id and graph.resolve(entity_id) in graph.entities:
                names[entity_id] = graph.display_name(entity_id)
        if people:
            for record in graph.entities.values():
                if record.kind == KIND_PERSON and record.name and graph.resolve(record.entity_id) == record.entity_id:
                    names.setdefault(record.entity_id, record.name)
    return names


def graph_stats(graph: MemoryGraph) -> Stats:
    """Counts of the memory (get_stats); the disk size is read outside the graph lock."""
    with graph.lock:
        kinds = [r.kind for r in graph.entities.values()]
        texts = [n.kind for n in graph.text.values()]
        index_size = len(graph.text_index) + sum(len(i) for i in graph.entity_index.values())
        stats = Stats(
            clips=len(graph.clips),
            last_clip_index=graph.last_clip_index,
            episodic=texts.count("episodic"),
            semantic=texts.count("semantic"),
            faces=kinds.count(KIND_FACE),
            voices=kinds.count(KIND_VOICE),
            persons=kinds.count(KIND_PERSON),
            objects=kinds.count(KIND_OBJECT),
            texts=kinds.count(KIND_TEXT),
            index_size=index_size,
            disk_bytes=0,
            schema_version=graph.backend.schema_version,
            memory_dir=graph.backend.location,
        )
    stats.disk_bytes = graph.backend.disk_bytes()
    return stats
