"""Graph logic over a real store and the real MiniLM embedder: entities, persons, merges, memories."""

from __future__ import annotations

import pytest
from m3mem_evidence import clip, face, match, unit, voice

from m3_memory.graph.memory_graph import GraphConfig
from m3_memory.memory import Memory

BACKENDS = ("sqlite", "milvus")  # the tests on the `memory` fixture run on both back-ends


def texts(record) -> list[str]:
    return [n.text for n in record.episodic + record.semantic]


def test_episodic_memories_and_entities(memory):
    record = memory.ingest(
        clip(0, faces=[face("face_1", 1.0), face("face_1", 2.5)], voices=[voice("voice_1", 3, 5, "good morning")])
    )
    assert "<face_1> is seen." in texts(record)
    assert '<voice_1> says: "good morning"' in texts(record)
    seen = next(n for n in record.episodic if n.text == "<face_1> is seen.")
    assert (seen.start_ns, seen.end_ns) == (1_000_000_000, 2_500_000_000)
    assert seen.entity_ids == ["face_1"]
    # a face and a voice without evidence of being one human are two persons
    assert memory.graph.person_of("face_1") == "person_1"
    assert memory.graph.person_of("voice_1") == "person_2"


def test_equivalence_merges_persons_and_old_id_resolves(memory):
    memory.ingest(clip(0, faces=[face("face_1", 1.0)], voices=[voice("voice_1", 2, 4, "hello there")]))
    assert memory.graph.person_of("voice_1") == "person_2"
    record = memory.ingest(
        clip(
            1,
            faces=[face("face_1", 31.0)],
            voices=[voice("voice_1", 32, 34, "hi")],
            matches=[match("face_1", "voice_1", 33)],
        )
    )
    assert "Equivalence: <face_1>, <voice_1>" in texts(record)
    assert memory.graph.person_of("voice_1") == "person_1"  # the older person survives
    entity = memory.search.get_entity("person_2")  # the merged id still resolves
    assert entity.entity_id == "person_1"
    assert entity.aliases == ["person_2"]
    assert entity.member_ids == ["face_1", "voice_1"]
    # ids are never reused: the next new entity gets person_3, not person_2
    memory.ingest(clip(2, faces=[face("face_7", 61.0)]))
    assert memory.graph.person_of(memory.graph.session_map["face_7"]) == "person_3"


def test_voice_matched_to_two_faces_does_not_collapse_two_people(memory):
    """The reference's failure: a voice linked to two faces joins both into one character."""
    memory.ingest(
        clip(
            0,
            faces=[face("face_1", 1.0), face("face_2", 1.0)],
            voices=[voice("voice_1", 2, 4, "hello"), voice("voice_2", 5, 7, "hi")],
            matches=[match("face_1", "voice_1", 4, 0.9, 5), match("face_2", "voice_2", 7, 0.9, 5)],
        )
    )
    assert memory.graph.person_of("voice_1") == memory.graph.person_of("face_1")
    assert memory.graph.person_of("voice_2") == memory.graph.person_of("face_2")
    # weaker evidence that voice_1 belongs to face_2 too: recorded, but the two people stay apart
    memory.ingest(clip(1, faces=[face("face_2", 31.0)], voices=[voice("voice_1", 32, 33, "yes")],
                       matches=[match("face_2", "voice_1", 33, 0.8, 2)]))  # fmt: skip
    assert memory.graph.person_of("face_1") != memory.graph.person_of("face_2")
    assert memory.search.get_stats().persons == 2


def test_same_input_gives_same_ids(tmp_path, embedder):
    def run(name: str) -> list:
        mem = Memory.open(str(tmp_path / name), embedder)
        out = []
        for index in range(3):
            record = mem.ingest(
                clip(
                    index,
                    faces=[face("face_1", index * 30 + 1), face("face_2", index * 30 + 2)],
                    voices=[voice("voice_1", index * 30 + 3, index * 30 + 5, "I like green tea")],
                    matches=[match("face_1", "voice_1", index * 30 + 5)],
                )
            )
            out.append(([(n.node_id, n.text, n.weight) for n in record.episodic + record.semantic], record.entity_ids))
        mem.close()
        return out

    assert run("a") == run("b")


def test_semantic_reinforcement_instead_of_insert(memory):
    first = memory.ingest(clip(0, voices=[voice("voice_1", 1, 3, "I like green tea.")]))
    fact = next(n for n in first.semantic if "green tea" in n.text)
    assert fact.text == "<voice_1> likes green tea." and fact.weight == 1.0
    second = memory.ingest(clip(1, voices=[voice("voice_1", 31, 33, "I really like green tea")]))
    reinforced = [n for n in second.semantic if n.node_id == fact.node_id]
    assert reinforced and reinforced[0].weight == 2.0  # +1, no new node
    assert sum("green tea" in n.text for n in memory.graph.text.values() if n.kind == "semantic") == 1
    # the same fact from another person is a different memory
    third = memory.ingest(clip(2, voices=[voice("voice_2", 61, 63, "I like green tea.")]))
    assert any(n.text == "<voice_2> likes green tea." and n.weight == 1.0 for n in third.semantic)
    # episodic memories are always inserted (one per utterance)
    assert memory.search.get_stats().episodic == 3


def test_semantic_weakening_below_threshold(tmp_path, embedder):
    mem = Memory.open(str(tmp_path / "m"), embedder, GraphConfig(weaken_threshold=0.45))
    mem.ingest(clip(0, voices=[voice("voice_1", 1, 3, "I like green tea.")]))
    record = mem.ingest(clip(1, voices=[voice("voice_1", 31, 33, "I put the keys in the drawer.")]))
    tea = next(n for n in mem.graph.text.values() if n.text == "<voice_1> likes green tea.")
    assert tea.weight == 0.0  # cosine (0.33) < 0.45 to a memory about the same person: -1
    assert any(n.text == "<voice_1> put the keys in the drawer." for n in record.semantic)
    # a memory weakened to 0 is no longer retrieved
    hits = mem.search.search_node("green tea", kinds=["semantic"], top_k=5)
    assert all(h.node_id != tea.node_id for h in hits)
    mem.close()


def test_duplicate_episodic_not_stored_twice(memory):
    dup = voice("voice_1", 1, 3, "hello")
    record = memory.ingest(clip(0, voices=[dup, dup], faces=[face("face_1", 1), face("face_1", 2)]))
    assert texts(record).count('<voice_1> says: "hello"') == 1
    assert texts(record).count("<face_1> is seen.") == 1


def test_names_attach_to_persons(memory):
    memory.ingest(
        clip(0, faces=[face("face_1", 1), face("face_2", 1)],
             # lower case on every line, as pocketsphinx writes (a recogniser writes case on all lines or none)
             voices=[voice("voice_1", 2, 4, "hi, my name is alice"), voice("voice_1", 5, 6, "thanks, bob")],
             matches=[match("face_1", "voice_1", 4)])
    )  # fmt: skip
    assert memory.search.get_entity("face_1").name == "Alice"
    assert memory.search.get_entity("voice_1").name == "Alice"
    assert memory.search.get_entity("face_2").name == "Bob"  # the only other person present
    # a named person is found by name through search_node
    hits = memory.search.search_node("Alice", kinds=["person"])
    assert [h.node_id for h in hits] == ["person_1"]


def test_as_of_limits(memory):
    for index, text in enumerate(["I keep the keys in the drawer", "I keep the keys in my pocket"]):
        memory.ingest(clip(index, voices=[voice("voice_1", index * 30 + 1, index * 30 + 3, text)]))
    now = memory.search.search_node("where are the keys kept", kinds=["episodic"], top_k=10)
    assert {h.clip_index for h in now} == {0, 1}
    then = memory.search.search_node("where are the keys kept", kinds=["episodic"], top_k=10, before_clip=0)
    assert {h.clip_index for h in then} == {0}
    stamped = memory.search.search_node("where are the keys", top_k=10, before_stamp_ns=10 * 1_000_000_000)
    assert stamped and all(h.start_ns <= 10 * 1_000_000_000 for h in stamped)
    clips = memory.search.search_clip("where are the keys kept", top_k=2, threshold=0.2, before_clip=0)
    assert [c.clip_index for c in clips] == [0]
    # by stream time, inside clip 1: its memory said at 31 s is in, nothing later of that clip
    memory.ingest(clip(2, voices=[voice("voice_1", 64, 66, "I keep the keys in the car")]))
    limit = 40 * 1_000_000_000
    stamped_clips = memory.search.search_clip("where are the keys kept", top_k=3, threshold=0.2, before_stamp_ns=limit)
    assert sorted(c.clip_index for c in stamped_clips) == [0, 1]
    assert all(n.start_ns <= limit for c in stamped_clips for n in c.episodic + c.semantic)
    assert "car" not in " ".join(n.text for c in stamped_clips for n in c.episodic)


def test_entity_matching_across_runs(tmp_path, embedder):
    """A restarted perception numbers ids from 1 again; embeddings map them to the stored entities."""
    path = str(tmp_path / "m")
    mem = Memory.open(path, embedder)
    mem.ingest(clip(0, faces=[face("face_1", 1, seed=11), face("face_2", 1, seed=12)]))
    mem.close()
    mem = Memory.open(path, embedder)
    record = mem.ingest(clip(1, faces=[face("face_1", 31, seed=12), face("face_2", 31, seed=99)]))
    assert mem.graph.session_map == {"face_1": "face_2", "face_2": "face_3"}
    assert "face_2" in record.entity_ids and "face_3" in record.entity_ids
    mem.close()


def test_clip_index_never_written_twice(memory):
    memory.ingest(clip(0, faces=[face("face_1", 1)]))
    with pytest.raises(ValueError, match="already stored"):
        memory.ingest(clip(0, faces=[face("face_1", 2)]))
    assert memory.store.integrity_check() == []


def test_missing_text_model_is_a_clear_error(tmp_path):
    from m3_memory.errors import ModelMissingError
    from m3_memory.search.embedder import TextEmbedder

    with pytest.raises(ModelMissingError, match=r"model\.safetensors"):
        TextEmbedder(str(tmp_path / "no_model"))


def test_failed_clip_leaves_no_trace(memory, monkeypatch):
    memory.ingest(clip(0, faces=[face("face_1", 1)]))

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(memory.graph, "_add_memory", broken)
    with pytest.raises(OSError, match="disk full"):
        memory.ingest(clip(1, faces=[face("face_2", 31)], voices=[voice("voice_1", 32, 33, "hello")]))
    monkeypatch.undo()
    assert sorted(memory.graph.clips) == [0] and "face_2" not in memory.graph.entities
    assert memory.graph.session_map == {"face_1": "face_1"}
    record = memory.ingest(clip(1, faces=[face("face_2", 31)], voices=[voice("voice_1", 32, 33, "hello")]))
    assert record.entity_ids[:2] == ["face_2", "voice_1"] and memory.store.integrity_check() == []


def test_unusable_embeddings_keep_the_observation(memory):
    bad = face("face_1", 1.0)
    bad.embedding = [float("nan")] * 128
    zero = face("face_2", 2.0)
    zero.embedding = [0.0] * 128
    record = memory.ingest(clip(0, faces=[bad, zero, face("face_3", 3.0)]))
    assert {"face_1", "face_2", "face_3"} <= set(record.entity_ids)
    assert memory.graph.entities["face_1"].observation_count == 1
    assert "face_1" not in memory.graph.entity_samples or not memory.graph.entity_samples["face_1"]
    hits = memory.search.search_node(face_embedding=unit(3, 128), top_k=3)
    assert [h.node_id for h in hits] == ["face_3"]  # only usable embeddings are indexed
