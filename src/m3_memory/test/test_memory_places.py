"""Where memories happened: a clip's path and each memory's place are stored (on both back-ends), labelled
with the region they lie in, and searches filter by a time window, a region or a point and radius."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from m3mem_evidence import S, clip, face, match, voice
from memory_backends import open_memory

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.memory import Memory
from m3_memory.place.poses import PoseSample
from m3_memory.place.regions import Regions
from m3_memory.search import where as where_module
from m3_memory.search.where import REGION_BONUS
from m3_memory.store.importer import import_export
from m3_memory.store.schema import SCHEMA_VERSION
from m3_memory.store.sqlite_store import SCHEMA_FILE, MemoryStore

BACKENDS = ("sqlite", "milvus")

REGIONS = """
frame_id: map
regions:
  kitchen:
    polygon: [[0, 0], [4, 0], [4, 3], [0, 3]]
  front hall:
    circle: {center: [10, 0], radius: 2}
"""


def walk(t0: float, t1: float, x0: float, x1: float, y: float, steps: int = 40) -> list[PoseSample]:
    """A straight walk from (x0, y) to (x1, y) during [t0, t1] seconds, heading along x."""
    return [
        PoseSample(int((t0 + (t1 - t0) * i / steps) * S), x0 + (x1 - x0) * i / steps, y, 0.0, "map")
        for i in range(steps + 1)
    ]


def fill(mem: Memory, tmp_path) -> Memory:
    """Three clips: one walked through the kitchen, one standing in the front hall, one without any pose."""
    regions_file = tmp_path / "regions.yaml"
    regions_file.write_text(REGIONS)
    mem.graph.regions = Regions.load(str(regions_file))
    kitchen = clip(0, faces=[face("face_1", 2)], voices=[voice("voice_1", 10, 14, "I left the keys on the shelf")])
    kitchen.path = walk(0, 30, 1.0, 3.0, 1.5)
    hall = clip(1, voices=[voice("voice_2", 40, 44, "the dog sleeps by the door")])
    hall.path = walk(30, 60, 10.5, 10.5, 0.0)
    nowhere = clip(2, voices=[voice("voice_3", 70, 74, "the weather is sunny today")])
    for evidence in (kitchen, hall, nowhere):
        mem.ingest(evidence)
    return mem


@pytest.fixture
def placed(request, tmp_path, embedder, backend_name):
    server = request.getfixturevalue("milvus_server") if backend_name == "milvus" else None
    mem = fill(open_memory(backend_name, str(tmp_path / "m"), embedder, server), tmp_path)
    yield mem, backend_name, server, tmp_path
    mem.close()


def said(memory: Memory, words: str):
    return next(n for n in memory.graph.text.values() if words in n.text and n.kind == "episodic")


def test_each_memory_keeps_where_the_robot_was_and_its_region(placed):
    memory = placed[0]
    keys = said(memory, "keys on the shelf")
    # the middle of the utterance (12 s) on the kitchen walk: x = 1 + 2 * 12/30
    assert keys.place.frame_id == "map" and keys.place.region == "kitchen"
    assert math.isclose(keys.place.x, 1.8, abs_tol=1e-6) and math.isclose(keys.place.y, 1.5)
    assert said(memory, "dog sleeps").place.region == "front hall"
    assert said(memory, "weather is sunny").place is None  # no pose during that clip


def test_places_and_paths_survive_reopening(placed, embedder):
    memory, backend_name, server, tmp_path = placed
    before = {n.node_id: n.place for n in memory.graph.text.values()}
    path = memory.graph.backend.clip_path(0)
    assert len(path) == 32 and path[0].x == 1.0 and path[-1].x == 3.0  # downsampled, ends kept
    assert memory.graph.backend.clip_path(2) == []
    prefix = getattr(memory.graph.backend.config, "collection_prefix", None) if backend_name == "milvus" else None
    memory.close()
    reopened = open_memory(backend_name, str(tmp_path / "m"), embedder, server, prefix=prefix)
    try:
        assert {n.node_id: n.place for n in reopened.graph.text.values()} == before
        assert reopened.graph.backend.clip_path(0) == path
    finally:
        reopened.close()
    placed[0].graph.backend = reopened.graph.backend  # the fixture's close is then a no-op on a closed back-end


def texts(hits) -> list[str]:
    return sorted(h.text for h in hits)


def test_search_by_region_point_and_time(placed):
    search = placed[0].search
    everything = search.search_node("what was said", kinds=["episodic"], top_k=20)
    assert len(everything) >= 3
    in_kitchen = search.search_node("what was said", kinds=["episodic"], top_k=20, where=search.where(region="Kitchen"))
    assert in_kitchen and all("shelf" in h.text or "<face_1>" in h.text for h in in_kitchen)
    assert all(h.place is not None and h.place.region == "kitchen" for h in in_kitchen)
    near_hall = search.where(x=10.0, y=1.0, radius_m=1.5)
    assert texts(search.search_node("what was said", kinds=["episodic"], top_k=20, where=near_hall)) == texts(
        [h for h in everything if h.place is not None and h.place.region == "front hall"]
    )
    later = search.where(after_ns=65 * S)  # only the third clip's memories end after 65 s
    hits = search.search_node("what was said", kinds=["episodic"], top_k=20, where=later)
    assert hits and all(h.end_ns >= 65 * S for h in hits) and any("sunny" in h.text for h in hits)
    both = search.where(after_ns=65 * S, region="kitchen")  # a time and a place nothing happened in together
    assert search.search_node("what was said", top_k=20, where=both) == []


def test_place_filters_leave_out_entities_and_time_windows_keep_those_seen_then(placed):
    search = placed[0].search
    assert search.search_node("face_1", kinds=["face"], where=search.where(region="kitchen")) == []
    assert [h.node_id for h in search.search_node("face_1", kinds=["face"], where=search.where(after_ns=1 * S))] == [
        "face_1"
    ]
    assert search.search_node("face_1", kinds=["face"], where=search.where(after_ns=50 * S)) == []


def test_search_clip_by_place(placed):
    search = placed[0].search
    clips = search.search_clip("keys dog weather", top_k=5, threshold=-1.0, where=search.where(region="front hall"))
    assert [c.clip_index for c in clips] == [1]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"region": "garage"}, "unknown region 'garage'; regions: 'kitchen', 'front hall'"),
        ({"radius_m": -1.0}, "radius_m >= 0"),
        ({"x": math.nan, "radius_m": 1.0}, "must be finite"),
        ({"after_ns": -5}, "after_stamp"),
    ],
)
def test_bad_windows_are_refused_with_a_reason(placed, arguments, words):
    with pytest.raises(MemoryApiError) as caught:
        placed[0].search.where(**arguments)
    assert caught.value.code == errors.INVALID_ARGUMENT and words in caught.value.message


def test_export_and_import_carry_places_and_paths(tmp_path, embedder):
    memory = fill(Memory.open(str(tmp_path / "m"), embedder), tmp_path)  # exports are made of SQLite stores
    data = memory.graph.backend.store.export_json(include_embeddings=True)
    assert len(data["clip_paths"]) == 64 and {p["region"] for p in data["text_places"]} == {"kitchen", "front hall"}
    export = tmp_path / "export.json"
    export.write_text(json.dumps(data))
    import_export(str(export), str(tmp_path / "copy"))
    copy = Memory.open(str(tmp_path / "copy"))
    try:
        assert {n.node_id: n.place for n in copy.graph.text.values()} == {
            n.node_id: n.place for n in memory.graph.text.values()
        }
    finally:
        copy.close()
    old = {k: v for k, v in data.items() if k not in ("text_places", "clip_paths")}  # an export made before places
    export.write_text(json.dumps({**old, "schema_version": 1}))
    import_export(str(export), str(tmp_path / "old"))
    copy = Memory.open(str(tmp_path / "old"))
    try:
        assert len(copy.graph.text) == len(memory.graph.text) and all(n.place is None for n in copy.graph.text.values())
    finally:
        copy.close()
        memory.close()


def test_a_version_1_store_reads_as_it_was_and_gains_the_place_tables_when_opened_for_writing(tmp_path, embedder):
    directory = tmp_path / "old"
    memory = Memory.open(str(directory), embedder)
    memory.ingest(clip(0, voices=[voice("voice_1", 3, 5, "I keep my bike in the shed")]))
    memory.close()
    conn = sqlite3.connect(directory / "memory.sqlite3")  # made into what version 1 wrote
    conn.executescript(
        "DROP TABLE text_places; DROP TABLE clip_paths; DROP TABLE sightings; DROP TABLE validity;"
        "UPDATE meta SET value='1' WHERE key='schema_version';"
    )
    conn.close()
    (directory / SCHEMA_FILE).write_text(json.dumps({"format": "m3_memory", "schema_version": 1}))
    readonly = MemoryStore(str(directory), create=False, readonly=True)
    try:
        assert readonly.schema_version == 1 and not readonly.has_places
        assert readonly.export_json()["text_places"] == []
    finally:
        readonly.close()
    reopened = Memory.open(str(directory), embedder)
    try:
        assert any("bike" in n.text for n in reopened.graph.text.values())
        assert reopened.graph.backend.store.schema_version == SCHEMA_VERSION == 3
        assert json.loads((directory / SCHEMA_FILE).read_text())["schema_version"] == SCHEMA_VERSION
        later = clip(1, voices=[voice("voice_1", 33, 35, "the shed is locked")])
        later.path = walk(30, 60, 0.0, 1.0, 0.0)
        reopened.ingest(later)
        assert said(reopened, "shed is locked").place is not None
    finally:
        reopened.close()


def test_where_and_when_someone_was_last_seen_or_heard(placed):
    memory = placed[0]
    back = clip(
        3, faces=[face("face_1", 95)], voices=[voice("voice_1", 96, 98, "hi, my name is Alice")],
        matches=[match("face_1", "voice_1", 98)],
    )  # fmt: skip
    back.path = walk(90, 120, 10.0, 10.0, 1.0)  # in the front hall
    memory.ingest(back)
    search = memory.search
    alice = search.locate_entity(name="alice", limit=5)
    assert alice.name == "Alice" and alice.entity_id == memory.graph.person_of("face_1")
    latest = alice.sightings[0]
    assert (latest.clip_index, latest.place.region) == (3, "front hall")
    assert {s.entity_id for s in alice.sightings} >= {"face_1", "voice_1"}
    assert [s.last_ns for s in alice.sightings] == sorted((s.last_ns for s in alice.sightings), reverse=True)
    before = search.locate_entity("face_1", before_ns=60 * S)  # as of one minute in: the kitchen walk
    (seen,) = before.sightings
    assert (seen.clip_index, seen.first_ns, seen.last_ns, seen.place.region) == (0, 2 * S, 2 * S, "kitchen")
    assert math.isclose(seen.place.x, 1.0 + 2.0 * 2 / 30, abs_tol=1e-6)
    assert search.locate_entity("voice_3").sightings[0].place is None  # heard where no pose was recorded
    assert search.locate_entity("face_1", before_ns=1 * S).sightings == []
    for call, code in (
        (lambda: search.locate_entity(), errors.EMPTY_QUERY),
        (lambda: search.locate_entity(name="Zed"), errors.UNKNOWN_ENTITY),
        (lambda: search.locate_entity("face_99"), errors.UNKNOWN_ENTITY),
        (lambda: search.locate_entity("face_1", limit=0), errors.INVALID_ARGUMENT),
    ):
        with pytest.raises(MemoryApiError) as caught:
            call()
        assert caught.value.code == code


def test_a_region_named_in_the_query_ranks_memories_made_there_higher(placed):
    memory = placed[0]
    search, regions = memory.search, memory.graph.regions
    query = "what was said in the kitchen"
    named = {h.node_id: h for h in search.search_node(query, kinds=["episodic"], top_k=10)}
    memory.graph.regions = Regions.empty()  # the same words, no regions file: nothing is named
    try:
        unnamed = {h.node_id: h for h in search.search_node(query, kinds=["episodic"], top_k=10)}
    finally:
        memory.graph.regions = regions
    kitchen = said(memory, "keys on the shelf").node_id
    assert math.isclose(named[kitchen].score, unnamed[kitchen].score + REGION_BONUS, abs_tol=1e-5)
    elsewhere = said(memory, "dog sleeps").node_id
    assert math.isclose(named[elsewhere].score, unnamed[elsewhere].score, abs_tol=1e-5)
    # an explicit place filter is the request's own: the text's region adds nothing then
    hall = search.search_node(query, kinds=["episodic"], top_k=10, where=search.where(region="front hall"))
    assert [h.node_id for h in hall] == [elsewhere]
    assert math.isclose(hall[0].score, unnamed[elsewhere].score, abs_tol=1e-5)


def test_a_named_region_too_large_for_exact_scoring_is_searched_in_the_index(placed, monkeypatch):
    memory = placed[0]
    query = "what was said in the kitchen"
    exact = {h.node_id: h.score for h in memory.search.search_node(query, kinds=["episodic"], top_k=10)}
    monkeypatch.setattr(where_module, "EXACT_CANDIDATES", 0)  # every region is "too large" now
    indexed = {h.node_id: h.score for h in memory.search.search_node(query, kinds=["episodic"], top_k=10)}
    kitchen = said(memory, "keys on the shelf").node_id
    assert math.isclose(indexed[kitchen], exact[kitchen], abs_tol=1e-5)  # still found, still REGION_BONUS higher
    assert indexed.keys() == exact.keys()
