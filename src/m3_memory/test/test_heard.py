"""Lines heard and not memorized yet are searchable (search/heard.py), with the real MiniLM embedder."""

from __future__ import annotations

from m3mem_evidence import clip, voice
from memory_backends import open_memory

from m3_memory.memorize.rules import UNCLEAR
from m3_memory.search.heard import heard_nodes, heard_records
from m3_memory.search.where import Where

NS = 1_000_000_000


def bakery(index: int = 3):
    """A clip still open: three lines, one of a voice memory has not met, one with no words."""
    return clip(
        index,
        voices=[
            voice("voice_2", 95, 97, "Hello Sofia, two rye loaves please."),
            voice("voice_9", 98, 99, "That will be six euros please."),
            voice("voice_2", 100, 100.5, "  "),
        ],
    )


def test_heard_lines_are_episodic_memories_in_time_order(embedder):
    nodes = heard_nodes(bakery(), {"voice_2": "voice_1"})
    assert [n.text for n in nodes] == [
        '<voice_1> says: "Hello Sofia, two rye loaves please."',
        f'{UNCLEAR} says: "That will be six euros please."',  # a voice memory has not met: no id
    ]
    assert [n.node_id for n in nodes] == ["heard_3_0", "heard_3_1"]
    assert [n.entity_ids for n in nodes] == [["voice_1"], []]
    assert [(n.start_ns, n.end_ns) for n in nodes] == [(95 * NS, 97 * NS), (98 * NS, 99 * NS)]


def test_the_clip_scores_its_best_line_and_keeps_the_as_of_limits(embedder):
    vectors = embedder.embed(["How much did the rye loaves cost?"])

    def found(**limits) -> list:
        return heard_records([bakery()], {}, embedder.embed, vectors, 0.3, **limits)

    [record] = found()
    assert record.heard and record.clip_index == 3 and record.semantic == []
    assert record.score == max(record.node_scores.values()) > 0.4  # the clip scores its best line
    assert [n.node_id for n in record.episodic] == ["heard_3_0", "heard_3_1"]  # with all its lines
    assert found(before_clip=2) == []  # asked as of an earlier clip: this one had not been heard
    assert found(before_clip=3)
    assert [n.node_id for n in found(before_stamp_ns=97 * NS)[0].episodic] == ["heard_3_0"]  # said later
    assert found(stored=[3]) == []  # stored while the question was asked: memory has it
    assert found(where=Where(point=(0.0, 0.0), radius_m=5.0)) == []  # a place window: no place yet
    assert heard_records([bakery()], {}, embedder.embed, vectors, 0.9) == []  # under the threshold


def test_search_clip_ranks_heard_lines_with_the_stored_clips(tmp_path, embedder):
    """Through the search API, as the services and the one-process control loop call it: the clip still
    open answers a question about what was just said, its voice named as memory names it."""
    mem = open_memory("sqlite", str(tmp_path / "m"), embedder, None)
    try:
        mem.ingest(clip(0, voices=[voice("voice_1", 3, 5, "Hi, my name is Anya. I am vegan now.")]))
        mem.ingest(clip(1, voices=[voice("voice_1", 33, 35, "The weather is sunny today.")]))
        voice_1 = mem.graph.session_map["voice_1"]
        opened = clip(2, voices=[voice("voice_1", 62, 64, "Two rye loaves cost six euros.")])
        question = "How much do the rye loaves cost?"
        assert mem.search.search_clip(question, top_k=3, threshold=-1.0)[0].clip_index != 2
        mem.search.unstored = lambda: [opened]
        records = mem.search.search_clip(question, top_k=3, threshold=-1.0)
        assert (records[0].clip_index, records[0].heard) == (2, True)
        assert [r.heard for r in records[1:]] == [False, False] and records[0].score > records[1].score
        assert records[0].robot_id == records[1].robot_id == "robot"  # heard by this robot
        assert records[0].episodic[0].entity_ids == [voice_1]
        assert records[0].names == {voice_1: mem.search.get_names([voice_1])[voice_1]}
        assert "six euros" in records[0].episodic[0].text
        assert 2 not in [r.clip_index for r in mem.search.search_clip(question, before_clip=1, threshold=-1.0)]
    finally:
        mem.close()
