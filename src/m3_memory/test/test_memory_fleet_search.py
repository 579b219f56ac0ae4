"""MemorySearch with a robot_id (what the search services call): two robots of a fleet on one Milvus
Lite server, each with a fact of its own; "" searches the fleet, a robot id one robot, and a memory
without a fleet refuses another robot's id. The services over DDS: test_memory_fleet_dds.py."""

from __future__ import annotations

import pytest
from m3mem_evidence import S, clip, face, match, voice
from memory_backends import fresh_prefix

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.memory_graph import GraphConfig
from m3_memory.memory import Memory
from m3_memory.milvus.backend import MilvusBackend, MilvusConfig
from m3_memory.place.poses import PoseSample
from m3_memory.place.regions import Regions
from m3_memory.search.api import SearchConfig


def robot(server, prefix: str, name: str, slot: int, embedder, tmp_path) -> Memory:
    config = MilvusConfig(
        uri=server.uri, collection_prefix=prefix, robot_id=name, fleet_slot=slot, spool_dir=str(tmp_path / name)
    )
    return Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig(), SearchConfig(robot_id=name))


def texts(records) -> list[tuple[str, str]]:
    return [(r.robot_id, n.text) for r in records for n in r.episodic + r.semantic]


@pytest.fixture
def fleet(tmp_path, embedder, milvus_server):
    prefix = fresh_prefix()
    a = robot(milvus_server, prefix, "a", 1, embedder, tmp_path)
    b = robot(milvus_server, prefix, "b", 2, embedder, tmp_path)
    # robot a meets Alice; robot b (a later clip, stream time 100 s on) hears where the keys are
    a.ingest(clip(0, faces=[face("face_1", 1)], voices=[voice("voice_1", 2, 4, "hi, my name is alice")],
                  matches=[match("face_1", "voice_1", 4)]))  # fmt: skip
    b.ingest(clip(0, voices=[voice("voice_3", 2, 4, "good morning")]))
    b.ingest(clip(4, faces=[face("face_1", 121)], voices=[voice("voice_1", 122, 124, "I put the keys in the drawer.")],
                  matches=[match("face_1", "voice_1", 124)]))  # fmt: skip
    yield a, b
    a.close()
    b.close()


def test_empty_robot_id_searches_the_fleet_and_an_id_one_robot(fleet):
    a, b = fleet
    own = a.search.search_clip("where are the keys?", top_k=5, threshold=0.3, robot_id="a")
    assert not any("drawer" in text for _, text in texts(own))  # robot a's own memory knows nothing of it
    fleet_wide = a.search.search_clip("where are the keys?", top_k=5, threshold=0.3)
    found = [(robot_id, text) for robot_id, text in texts(fleet_wide) if "drawer" in text]
    assert found and found[0][0] == "b"
    record = next(r for r in fleet_wide if r.robot_id == "b")
    assert record.clip_index == 4 and all(n.node_id.startswith("b/") for n in record.episodic)
    assert set(record.node_scores) == {n.node_id for n in record.episodic + record.semantic}
    assert "Alice" in found[0][1]  # b's face_1 is a's Alice: people are shared, tags render as names
    only_b = a.search.search_clip("where are the keys?", top_k=5, threshold=0.3, robot_id="b")
    assert {r.robot_id for r in only_b} == {"b"} and only_b[0].clip_index == 4
    hits = a.search.search_node("keys drawer", kinds=["episodic"], top_k=5)
    assert hits[0].robot_id == "b" and hits[0].node_id.startswith("b/episodic_") and "drawer" in hits[0].text
    assert all(h.robot_id == "a" for h in a.search.search_node("keys drawer", kinds=["episodic"], robot_id="a"))
    assert b.search.search_node("my name is alice", kinds=["episodic"], top_k=1)[0].robot_id == "a"  # b sees a's


def test_as_of_limits_hold_for_the_other_robots(fleet):
    a, _ = fleet
    before_keys = a.search.search_clip("where are the keys?", top_k=5, threshold=0.3, before_stamp_ns=100 * S)
    assert not any("drawer" in text for _, text in texts(before_keys))  # b's keys clip started at 120 s
    # fleet search: before_clip is robot a's clip index: b's memories that started by the end of a's clip 0
    as_of_clip = a.search.search_clip("where are the keys?", top_k=5, threshold=0.3, before_clip=0)
    assert not any("drawer" in text for _, text in texts(as_of_clip))
    # a named robot: its own clip index
    named = a.search.search_clip("where are the keys?", top_k=5, threshold=0.3, before_clip=3, robot_id="b")
    assert not any("drawer" in text for _, text in texts(named))
    named = a.search.search_clip("where are the keys?", top_k=5, threshold=0.3, before_clip=4, robot_id="b")
    assert any("drawer" in text for _, text in texts(named))


@pytest.mark.parametrize("bad", ["fleet", "a b", "../x", 'b" or robot_id != "', "x" * 65, "-a"])
def test_an_invalid_robot_id_is_invalid_argument(fleet, bad):
    a, _ = fleet
    for call in (lambda: a.search.search_clip("keys", robot_id=bad), lambda: a.search.search_node("k", robot_id=bad)):
        with pytest.raises(MemoryApiError) as refused:
            call()
        assert refused.value.code == errors.INVALID_ARGUMENT and "robot_id" in refused.value.message


def test_without_a_fleet_another_robot_id_is_invalid_argument(tmp_path, embedder, milvus_server):
    sqlite = Memory.open(str(tmp_path / "mem"), embedder, search_config=SearchConfig(robot_id="a"))
    alone = robot(milvus_server, fresh_prefix(), "solo", 0, embedder, tmp_path)
    try:
        sqlite.ingest(clip(0, voices=[voice("voice_1", 2, 4, "the keys are in the drawer")]))
        assert sqlite.search.search_clip("keys", threshold=0.3, robot_id="")[0].robot_id == "a"  # as today
        assert sqlite.search.search_clip("keys", threshold=0.3, robot_id="a")[0].robot_id == "a"
        for memory, why in ((sqlite, "memory_backend is sqlite"), (alone, "fleet_slot is 0")):
            with pytest.raises(MemoryApiError) as refused:
                memory.search.search_clip("keys", robot_id="b")
            assert refused.value.code == errors.INVALID_ARGUMENT and f"no fleet: {why}" in refused.value.message
    finally:
        sqlite.close()
        alone.close()


REGIONS = """
frame_id: map
regions:
  kitchen: {polygon: [[0, 0], [4, 0], [4, 3], [0, 3]]}
  hall: {circle: {center: [10, 0], radius: 2}}
"""


def stand(t0: float, t1: float, x: float, y: float) -> list[PoseSample]:
    return [PoseSample(int((t0 + (t1 - t0) * i / 10) * S), x, y, 0.0, "map") for i in range(11)]


def test_a_place_filter_finds_other_robots_memories_by_their_place_columns(tmp_path, embedder, milvus_server):
    """The fleet shares one map and regions file; Milvus filters the other robot's rows by the place's box,
    the exact shape is checked on the hits, and the hits carry their place."""
    (tmp_path / "regions.yaml").write_text(REGIONS)
    prefix = fresh_prefix()
    a, b = (robot(milvus_server, prefix, name, slot, embedder, tmp_path) for name, slot in (("a", 1), ("b", 2)))
    try:
        for memory in (a, b):
            memory.graph.regions = Regions.load(str(tmp_path / "regions.yaml"))
        kitchen = clip(0, voices=[voice("voice_1", 10, 14, "I put the keys in the kitchen drawer")])
        kitchen.path = stand(0, 30, 1.0, 1.5)
        corner = clip(1, voices=[voice("voice_1", 40, 44, "the spare keys hang on a hook")])
        corner.path = stand(30, 60, 11.8, 1.8)  # in the hall circle's box, outside the circle: no region
        hall = clip(2, voices=[voice("voice_2", 70, 74, "the keys to the car are by the door")])
        hall.path = stand(60, 90, 10.5, 0.0)
        nowhere = clip(3, voices=[voice("voice_2", 100, 104, "someone lost the keys again")])
        for evidence in (kitchen, corner, hall, nowhere):
            b.ingest(evidence)
        mine = clip(0, voices=[voice("voice_3", 10, 14, "my keys are on the kitchen table")])
        mine.path = stand(0, 30, 2.0, 2.0)
        a.ingest(mine)

        def found(where, robot_id):
            hits = a.search.search_node("where are the keys", kinds=["episodic"], top_k=10, where=where,
                                        robot_id=robot_id)  # fmt: skip
            return {(h.robot_id, h.text.split(": ", 1)[-1].strip('"')): h for h in hits}

        in_kitchen = found(a.search.where(region="kitchen"), "b")
        assert [text for _, text in in_kitchen] == ["I put the keys in the kitchen drawer"]
        hit = next(iter(in_kitchen.values()))
        assert hit.place.region == "kitchen" and hit.place.frame_id == "map"
        assert (hit.place.x, hit.place.y) == (1.0, 1.5)
        near_door = found(a.search.where(x=10.0, y=0.0, radius_m=1.0), "b")
        assert [text for _, text in near_door] == ["the keys to the car are by the door"]
        in_hall = found(a.search.where(region="hall"), "b")  # the corner passes Milvus' box, not the circle
        assert [text for _, text in in_hall] == ["the keys to the car are by the door"]
        corner_box = found(a.search.where(x=11.8, y=1.8, radius_m=0.1), "b")
        assert [text for _, text in corner_box] == ["the spare keys hang on a hook"]
        assert corner_box[("b", "the spare keys hang on a hook")].place.region == ""
        fleet_kitchen = found(a.search.where(region="kitchen"), "")
        assert {robot for robot, _ in fleet_kitchen} == {"a", "b"} and len(fleet_kitchen) == 2
        later = found(a.search.where(after_ns=60 * S, x=10.0, y=0.0, radius_m=5.0), "b")
        assert [text for _, text in later] == ["the keys to the car are by the door"]
        clips = a.search.search_clip("keys", top_k=5, threshold=-1.0, robot_id="b", where=a.search.where(region="hall"))
        assert [(r.robot_id, r.clip_index) for r in clips] == [("b", 2)]
        assert clips[0].episodic[0].place.region == "hall"

        a.search.fleet.reader.backend.place_columns = False  # as a collection made before place columns
        with pytest.raises(MemoryApiError) as refused:
            found(a.search.where(region="kitchen"), "b")
        assert refused.value.code == errors.INVALID_ARGUMENT and "set robot_id to 'a'" in refused.value.message
    finally:
        a.close()
        b.close()
