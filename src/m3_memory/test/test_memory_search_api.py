"""Search API semantics and every bad-input error code (the logic the services call)."""

from __future__ import annotations

import math
import threading

import pytest
from m3mem_evidence import clip, face, match, unit, voice
from memory_backends import open_memory

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.search.api import SearchConfig
from m3_memory.store.schema import SCHEMA_VERSION

BACKENDS = ("sqlite", "milvus")  # every test here runs on both back-ends


@pytest.fixture
def filled(request, tmp_path, embedder, backend_name):
    server = request.getfixturevalue("milvus_server") if backend_name == "milvus" else None
    config = SearchConfig(max_query_chars=200)
    mem = open_memory(backend_name, str(tmp_path / "m"), embedder, server, search_config=config)
    mem.ingest(
        clip(0, faces=[face("face_1", 1), face("face_2", 2)],
             voices=[voice("voice_1", 3, 5, "hi, my name is Alice"), voice("voice_1", 6, 8, "I like green tea")],
             matches=[match("face_1", "voice_1", 8)])
    )  # fmt: skip
    mem.ingest(clip(1, faces=[face("face_2", 31)], voices=[voice("voice_2", 32, 34, "I put the keys in the drawer")]))
    mem.ingest(clip(2, faces=[face("face_3", 61)], voices=[voice("voice_3", 62, 64, "the weather is sunny today")]))
    yield mem
    mem.close()


def code_of(call) -> int:
    with pytest.raises(MemoryApiError) as info:
        call()
    return info.value.code


def test_search_clip_reference_semantics(filled):
    clips = filled.search.search_clip("where are the keys?", top_k=2, threshold=0.3)
    assert [c.clip_index for c in clips] == [1]  # only clips at or above the threshold
    best = clips[0]
    assert math.isclose(best.score, max(best.node_scores.values()), abs_tol=1e-5)
    assert len(best.episodic) == 2  # the clip comes with all its memories
    many = filled.search.search_clip("where are the keys?", top_k=3, threshold=-1.0)
    assert many[0].clip_index == 1 and len(many) == 3
    assert [c.score for c in many] == sorted((c.score for c in many), reverse=True)
    assert filled.search.search_clip("where are the keys?", top_k=3, threshold=0.3, before_clip=0) == []


def test_search_clip_expands_person_ids_and_renders_names(filled):
    person = filled.graph.person_of("voice_1")
    clips = filled.search.search_clip(f"What does <{person}> like to drink?", top_k=1, threshold=0.3)
    assert clips and clips[0].clip_index == 0
    assert "Alice likes green tea." in [n.text for n in clips[0].semantic]
    unnamed = filled.search.search_clip("keys drawer", top_k=1, threshold=0.3)[0]
    speaker = filled.graph.person_of("voice_2")
    assert f'<{speaker}> says: "I put the keys in the drawer"' in [n.text for n in unnamed.episodic]


def test_search_results_carry_their_entities_names(filled):
    clip0 = filled.search.search_clip("green tea", top_k=1, threshold=0.3)[0]
    assert clip0.clip_index == 0 and clip0.names["voice_1"] == "Alice" and clip0.names["face_2"] == ""
    assert set(clip0.names) == {i for n in clip0.episodic + clip0.semantic for i in n.entity_ids}
    hits = filled.search.search_node("keys drawer", top_k=3)
    assert all(len(h.entity_names) == len(h.entity_ids) for h in hits)
    by_id = {i: name for h in hits for i, name in zip(h.entity_ids, h.entity_names, strict=True)}
    assert by_id.get("voice_2") == ""  # nobody named the speaker of clip 1
    filled.ingest(clip(3, voices=[voice("voice_2", 91, 93, "my name is Dave")]))
    hits = filled.search.search_node("keys drawer", top_k=3)
    assert {i: n for h in hits for i, n in zip(h.entity_ids, h.entity_names, strict=True)}["voice_2"] == "Dave"


def test_conversation_keeps_renderings(filled):
    speaker = filled.graph.person_of("voice_2")
    first = filled.search.search_clip("keys drawer", top_k=1, threshold=0.3, conversation_id="c1")[0]
    assert any(n.text.startswith(f"<{speaker}>") for n in first.episodic)
    # a name is learnt mid-conversation: conversation c1 keeps <person_k>, a new one uses the name
    filled.ingest(clip(3, voices=[voice("voice_2", 91, 93, "my name is Dave")]))
    again = filled.search.search_clip("keys drawer", top_k=1, threshold=0.3, conversation_id="c1")[0]
    assert [n.text for n in again.episodic] == [n.text for n in first.episodic]
    fresh = filled.search.search_clip("keys drawer", top_k=1, threshold=0.3, conversation_id="c2")[0]
    assert any(n.text.startswith("Dave says") for n in fresh.episodic)


def test_search_node_text_kinds_and_top_k(filled):
    hits = filled.search.search_node("green tea", top_k=3)
    assert hits[0].text in ("<voice_1> likes green tea.", '<voice_1> says: "I like green tea"')
    assert len(hits) == 3 and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    semantic = filled.search.search_node("green tea", kinds=["semantic"], top_k=100)
    assert semantic and all(h.kind == "semantic" for h in semantic)


def test_search_node_by_face_and_voice_embedding(filled):
    hits = filled.search.search_node(face_embedding=unit(2, 128), top_k=2)
    assert hits[0].node_id == "face_2" and hits[0].score > 0.99
    hits = filled.search.search_node(voice_embedding=unit(1003, 256), top_k=1)
    assert [h.node_id for h in hits] == ["voice_3"]
    hits = filled.search.search_node(face_embedding=unit(3, 128), top_k=5, before_clip=1)
    assert "face_3" not in [h.node_id for h in hits]  # face_3 first appeared in clip 2


def test_get_entity_and_stats(filled, backend_name):
    person = filled.search.get_entity("face_1")
    assert person.kind == "face" and person.name == "Alice" and person.crop_jpeg == b""
    alice = filled.search.get_entity(person.member_ids[0])
    assert alice.member_ids == ["face_1", "voice_1"] and alice.memory_ids
    texts = [filled.graph.text[n].seq for n in alice.memory_ids]
    assert texts == sorted(texts, reverse=True)  # newest first
    stats = filled.search.get_stats()
    assert (stats.clips, stats.last_clip_index, stats.faces, stats.voices) == (3, 2, 3, 3)
    assert stats.persons == 5 and stats.schema_version == (SCHEMA_VERSION if backend_name == "sqlite" else 1)
    assert stats.disk_bytes > 0 if backend_name == "sqlite" else stats.disk_bytes == 0  # Milvus: held by the server


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"query": ""}, errors.EMPTY_QUERY),
        ({"query": "   "}, errors.EMPTY_QUERY),
        ({"query": "x" * 201}, errors.QUERY_TOO_LONG),
        ({"query": "tea", "top_k": 0}, errors.INVALID_ARGUMENT),
        ({"query": "tea", "top_k": 101}, errors.INVALID_ARGUMENT),
        ({"query": "tea", "kinds": ["episodic", "dream"]}, errors.INVALID_ARGUMENT),
        ({"query": "tea", "before_clip": -2}, errors.INVALID_ARGUMENT),
        ({"query": "tea", "before_stamp_ns": -1}, errors.INVALID_ARGUMENT),
        ({"face_embedding": [0.1] * 64}, errors.INVALID_IMAGE),
        ({"face_embedding": [float("nan")] * 128}, errors.INVALID_IMAGE),
        ({"face_embedding": [0.0] * 128}, errors.INVALID_IMAGE),
        ({"voice_embedding": [0.1] * 10}, errors.INVALID_AUDIO),
        ({"voice_embedding": [float("inf")] * 256}, errors.INVALID_AUDIO),
    ],
)
def test_search_node_bad_input(filled, kwargs, code):
    assert code_of(lambda: filled.search.search_node(**kwargs)) == code


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"query": ""}, errors.EMPTY_QUERY),
        ({"query": "y" * 500}, errors.QUERY_TOO_LONG),
        ({"query": "tea", "top_k": 0}, errors.INVALID_ARGUMENT),
        ({"query": "tea", "top_k": 1000}, errors.INVALID_ARGUMENT),
        ({"query": "tea", "threshold": 1.5}, errors.INVALID_ARGUMENT),
        ({"query": "tea", "threshold": float("nan")}, errors.INVALID_ARGUMENT),
    ],
)
def test_search_clip_bad_input(filled, kwargs, code):
    assert code_of(lambda: filled.search.search_clip(**kwargs)) == code


def test_get_entity_bad_input(filled):
    assert code_of(lambda: filled.search.get_entity("")) == errors.EMPTY_QUERY
    assert code_of(lambda: filled.search.get_entity("face_99")) == errors.UNKNOWN_ENTITY
    assert code_of(lambda: filled.search.get_entity("banana")) == errors.UNKNOWN_ENTITY


def test_searches_while_clips_are_written(filled):
    """Readers never see half a clip: every clip a search returns has all four of its memories."""
    failures: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for record in filled.search.search_clip("parcel number", top_k=5, threshold=-1.0):
                if record.clip_index >= 10 and len(record.episodic) != 3:
                    failures.append(f"clip {record.clip_index} had {len(record.episodic)} episodic memories")
            filled.search.search_node("parcel", top_k=20)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for index in range(10, 25):
            t = index * 30.0
            filled.ingest(
                clip(index, faces=[face("face_5", t + 1)],
                     voices=[voice("voice_5", t + 2, t + 3, f"parcel number {index} is here"),
                             voice("voice_5", t + 4, t + 5, f"I sent parcel {index}")])
            )  # fmt: skip
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert failures == []
    assert filled.search.get_stats().clips == 18
