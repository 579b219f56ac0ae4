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
