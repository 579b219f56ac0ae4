"""Things seen as entities (issue 23, graph.things): an object track and a piece of written text become
entities with a label, crop, sightings and memories, kept by both back-ends, found by search_node and
get_entity; a schema-2 store and a schema-2 export take them after the upgrade."""

from __future__ import annotations

import json
import sqlite3

from m3mem_evidence import S, clip, face, read, seen, voice
from memory_backends import BOTH, open_memory

from m3_memory.graph.records import ObjectEvidence
from m3_memory.memory import Memory
from m3_memory.search.locate import locate
from m3_memory.store.importer import import_export
from m3_memory.store.schema import SCHEMA_VERSION
from m3_memory.store.sqlite_backend import SqliteBackend
from m3_memory.store.sqlite_store import DB_FILE, SCHEMA_FILE, MemoryStore

BACKENDS = BOTH
CROP = b"\xff\xd8\xff\xe0 a cup \xff\xd9"  # stored and returned as given (a JPEG's bytes)


def cup(t: float, confidence: float = 0.7, crop: bytes = b"") -> ObjectEvidence:
    sighting = seen("cup-1", "Cup", t, confidence)  # a detector's own id form
    sighting.crop_jpeg = crop
    return sighting


def two_clips(mem: Memory) -> None:
    mem.ingest(clip(0, faces=[face("face_1", 1)], objects=[cup(1.2), cup(2.0, 0.9, CROP)],
                    texts=[read("text_1", "Dentist Tuesday 3 pm", 1.5)]))  # fmt: skip
    mem.ingest(clip(1, voices=[voice("voice_1", 31, 33, "Where did I put it?")], objects=[cup(32.0, 0.5)]))


def test_an_object_track_and_a_text_become_entities_across_clips(request, tmp_path, embedder, backend_name):
    server = request.getfixturevalue("milvus_server") if backend_name == "milvus" else None
    mem = open_memory(backend_name, str(tmp_path / "m"), embedder, server)
    try:
        two_clips(mem)
        graph = mem.graph
        things = sorted((r.entity_id, r.kind, r.label) for r in graph.entities.values() if r.kind in ("object", "text"))
        assert things == [("object_1", "object", "cup"), ("text_1", "text", "Dentist Tuesday 3 pm")]
        record = graph.entities["object_1"]
        assert (record.first_clip, record.last_clip, record.observation_count) == (0, 1, 3)
        assert (record.first_ns, record.last_ns, record.person_id) == (int(1.2 * S), 32 * S, "")
        assert graph.person_of("object_1") is None and "object_1" not in graph.members_of(graph.person_of("face_1"))
        assert [(s.clip_index, s.first_ns, s.last_ns) for s in graph.sightings["object_1"]] == [
            (0, int(1.2 * S), 2 * S), (1, 32 * S, 32 * S),
        ]  # fmt: skip
        view = mem.search.get_entity("object_1")
        assert (view.kind, view.label, view.name, view.member_ids, view.crop_jpeg) == ("object", "cup", "", [], CROP)
        memories = [graph.text[n] for n in view.memory_ids]
        assert [m.text for m in memories] == ["A cup is seen.", "<face_1> is seen near a cup."]  # newest first
        assert memories[1].entity_ids == ["face_1", "object_1"]  # the people in view and the thing
        note = mem.search.get_entity("text_1")
        assert (note.kind, note.label, note.crop_jpeg) == ("text", "Dentist Tuesday 3 pm", b"")
        assert [graph.text[n].text for n in note.memory_ids] == ['A written note or sign says: "Dentist Tuesday 3 pm"']
        assert [c["entity_ids"] for c in (graph.clips[0], graph.clips[1])] == [
            ["face_1", "object_1", "text_1", "person_1"], ["object_1", "voice_1", "person_2"],
        ]  # fmt: skip
        hits = mem.search.search_node("Where is the cup?", kinds=["object"], top_k=5)
        assert [(h.node_id, h.kind, h.text) for h in hits] == [("object_1", "object", "object_1 is an object: cup")]
        assert [s.clip_index for s in locate(graph, "object_1", limit=2).sightings] == [1, 0]
        assert mem.search.get_names(["object_1", "face_1"]) == {"object_1": "", "face_1": ""}  # things: no name
        stats = mem.search.get_stats()
        assert (stats.objects, stats.texts, stats.faces) == (1, 1, 1)  # things are counted apart from people
    finally:
        mem.close()
    if backend_name == "sqlite":  # kept: a new run reads them, and its tracks make new entities
        again = Memory.open(str(tmp_path / "m"), embedder)
        try:
            assert again.search.get_entity("object_1").label == "cup"
            again.ingest(clip(2, objects=[cup(61.0)]))
            assert sorted(e for e in again.graph.entities if e.startswith("object_")) == ["object_1", "object_2"]
        finally:
            again.close()


def _as_schema_2(directory) -> None:
    """Turn a store back into schema 2: the entities table without things or labels (how stores were)."""
    conn = sqlite3.connect(directory / DB_FILE)
    columns = (
        "entity_id, seq, kind, name, person_id, observation_count, first_clip, last_clip, first_ns, last_ns,"
        " name_votes, crop_score, crop_jpeg"
    )
    conn.executescript(
        "PRAGMA foreign_keys=OFF; BEGIN;"
        "CREATE TABLE old (entity_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, kind TEXT NOT NULL CHECK (kind IN"
        " ('face','voice','person')), name TEXT NOT NULL DEFAULT '', person_id TEXT NOT NULL DEFAULT '',"
        " observation_count INTEGER NOT NULL DEFAULT 0, first_clip INTEGER NOT NULL DEFAULT -1,"
        " last_clip INTEGER NOT NULL DEFAULT -1, first_ns INTEGER NOT NULL DEFAULT 0,"
        " last_ns INTEGER NOT NULL DEFAULT 0, name_votes TEXT NOT NULL DEFAULT '{}',"
        " crop_score REAL NOT NULL DEFAULT -1, crop_jpeg BLOB, UNIQUE (kind, seq));"
        f"INSERT INTO old ({columns}) SELECT {columns} FROM entities; DROP TABLE entities;"
        "ALTER TABLE old RENAME TO entities; UPDATE meta SET value='2' WHERE key='schema_version'; COMMIT;"
    )
    conn.close()
    (directory / SCHEMA_FILE).write_text(json.dumps({"format": "m3_memory", "schema_version": 2, "database": DB_FILE}))


def test_a_schema_2_store_keeps_its_people_and_takes_things_once_opened_for_writing(tmp_path, embedder):
    directory = tmp_path / "m"
    mem = Memory.open(str(directory), embedder)
    mem.ingest(clip(0, faces=[face("face_1", 1)], voices=[voice("voice_1", 2, 4, "I'm Ana.")]))
    mem.close()
    _as_schema_2(directory)
    readonly = MemoryStore(str(directory), readonly=True)  # read as it is, not upgraded
    try:
        snapshot = SqliteBackend(readonly).load(embedder.dim)
        assert readonly.schema_version == 2 and {r.entity_id: r.label for r in snapshot.entities}["face_1"] == ""
    finally:
        readonly.close()
    mem = Memory.open(str(directory), embedder)
    try:
        assert mem.graph.backend.store.schema_version == SCHEMA_VERSION == 3
        assert sorted(mem.graph.entities) == ["face_1", "person_1", "person_2", "voice_1"]
        mem.ingest(clip(1, objects=[cup(31.0, crop=CROP)]))
        assert mem.search.get_entity("object_1").crop_jpeg == CROP
        assert mem.graph.backend.store.integrity_check() == []
    finally:
        mem.close()


def test_an_export_of_schema_2_imports_with_empty_labels(tmp_path, embedder):
    mem = Memory.open(str(tmp_path / "m"), embedder)
    try:
        mem.ingest(clip(0, faces=[face("face_1", 1)], voices=[voice("voice_1", 2, 4, "Hello there.")]))
        data = mem.graph.backend.store.export_json(include_embeddings=True)
    finally:
        mem.close()
    for row in data["entities"]:
        del row["label"]  # as schema 2 wrote it
    export = tmp_path / "old.json"
    export.write_text(json.dumps({**data, "schema_version": 2}))
    imported = import_export(str(export), str(tmp_path / "new"))
    assert imported["faces"] == 1 and imported["voices"] == 1 and imported["objects"] == 0
    again = Memory.open(str(tmp_path / "new"), embedder)
    try:
        assert {r.label for r in again.graph.entities.values()} == {""}
    finally:
        again.close()
