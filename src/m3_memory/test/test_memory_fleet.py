"""Two robots on one Milvus (a milvus-lite server): people are shared (a face seen by one robot is
the identity the other stored; names, merges and ids agree), ids never collide, and searches cover
the fleet or one robot. The two-process version is test_memory_fleet_processes.py."""

from __future__ import annotations

from m3mem_evidence import clip, face, match, voice
from memory_backends import fresh_prefix

from m3_memory.graph.memory_graph import GraphConfig
from m3_memory.memory import Memory
from m3_memory.milvus.backend import MilvusBackend, MilvusConfig


def robot(server, prefix: str, name: str, slot: int, embedder, tmp_path) -> Memory:
    config = MilvusConfig(
        uri=server.uri, collection_prefix=prefix, robot_id=name, fleet_slot=slot, spool_dir=str(tmp_path / name)
    )
    return Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig())


def test_two_robots_share_people_and_search_the_fleet(tmp_path, embedder, milvus_server):
    prefix = fresh_prefix()
    a = robot(milvus_server, prefix, "robot_a", 1, embedder, tmp_path)
    b = robot(milvus_server, prefix, "robot_b", 2, embedder, tmp_path)
    try:
        # robot a meets Alice: ids are robot a's (n * 1000 + slot 1)
        first = a.ingest(
            clip(0, faces=[face("face_1", 1)], voices=[voice("voice_1", 2, 4, "hi, my name is alice")],
                 matches=[match("face_1", "voice_1", 4)])
        )  # fmt: skip
        assert first.entity_ids == ["face_1001", "voice_1001", "person_1001"]
        assert a.search.get_entity("voice_1001").name == "Alice"
        # robot b sees the same face (its own perception id face_1) and a new voice
        second = b.ingest(clip(0, faces=[face("face_1", 5)], voices=[voice("voice_7", 6, 8, "I like green tea.")]))
        assert "face_1001" in second.entity_ids  # joined the identity robot a stored
        assert "voice_1002" in second.entity_ids  # robot b's own id (slot 2): no collision with a's
        assert b.search.get_entity("face_1001").name == "Alice"
        assert b.graph.person_of("face_1001") == "person_1001"
        # robot b meets someone new and learns that this face and the green-tea voice are one human
        merged = b.ingest(
            clip(1, faces=[face("face_5", 31)], voices=[voice("voice_7", 32, 34, "the keys are in the drawer")],
                 matches=[match("face_5", "voice_7", 33)])
        )  # fmt: skip
        assert merged.entity_ids == ["face_1002", "voice_1002", "person_1002"]  # b's first face; persons merged
        a.ingest(clip(1, voices=[voice("voice_9", 61, 63, "good morning")]))  # robot a takes in b's changes
        assert a.graph.person_of("face_1002") == "person_1002"  # the merge is the fleet's
        assert a.search.get_entity("person_2002").entity_id == "person_1002"  # the merged id resolves on a too
        assert "voice_2001" in a.graph.entities  # robot a's ids go on from its own counter
        # fleet-wide search by default, one robot on request
        hits = a.search_fleet("green tea", top_k=20)
        assert {h["robot_id"] for h in hits} == {"robot_a", "robot_b"}
        assert any(h["robot_id"] == "robot_b" and "green tea" in h["text"] for h in hits[:3])
        only_a = a.search_fleet("green tea", top_k=20, robot_id="robot_a")
        assert only_a and {h["robot_id"] for h in only_a} == {"robot_a"}
    finally:
        a.close()
        b.close()


def test_a_robot_alone_keeps_todays_ids(tmp_path, embedder, milvus_server):
    alone = robot(milvus_server, fresh_prefix(), "solo", 0, embedder, tmp_path)
    try:
        assert alone.ingest(clip(0, faces=[face("face_1", 1)])).entity_ids == ["face_1", "person_1"]
        assert alone.graph.refresh_people() is False  # nothing shared
    finally:
        alone.close()


def test_a_person_saved_after_another_robot_merged_it_stays_merged(tmp_path, embedder, milvus_server, monkeypatch):
    prefix = fresh_prefix()
    a = robot(milvus_server, prefix, "robot_a", 1, embedder, tmp_path)
    b = robot(milvus_server, prefix, "robot_b", 2, embedder, tmp_path)
    try:
        a.ingest(clip(0, faces=[face("face_1", 1)], voices=[voice("voice_1", 2, 4, "hello")]))  # two persons
        b.ingest(clip(0, faces=[face("face_1", 5)], voices=[voice("voice_1", 6, 8, "hello again")],
                      matches=[match("face_1", "voice_1", 8)]))  # fmt: skip
        assert b.graph.person_of("voice_1001") == "person_1001"  # b merged person_2001 away
        monkeypatch.setattr(a.graph, "refresh_people", lambda: False)  # a has not seen the merge yet...
        a.ingest(clip(1, voices=[voice("voice_1", 32, 34, "still here")]))  # ...and saves person_2001
        monkeypatch.undo()
        c = robot(milvus_server, prefix, "robot_c", 3, embedder, tmp_path)
        try:
            assert "person_2001" not in c.graph.entities and c.graph.person_of("voice_1001") == "person_1001"
            assert c.search.get_stats().persons == 1
        finally:
            c.close()
    finally:
        a.close()
        b.close()
