"""DirectMemoryClient on a real m3_memory Memory (real MiniLM embedder, rules memorizer) built in tmp_path:
conversion, error mapping, the loop answering through it, and parity with the service path
(MemoryNode + RosMemoryClient over DDS in another process) for the same queries."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from evidence_builders import S, face, voice

from m3_control.direct_memory_client import QUERY_ERRORS, DirectMemoryClient
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import MEMORY_UNAVAILABLE, SUCCEEDED, LoopConfig, run_loop
from m3_control.memory_client import Clip, Memory, MemoryClient, MemoryQueryRejected, MemoryUnavailable
from m3_control.skills import load_skills
from m3_memory.errors import StoreError
from m3_memory.graph.records import ClipEvidence, MatchEvidence, ObjectEvidence
from m3_memory.memory import Memory as M3Memory
from m3_memory.search.api import SearchConfig
from m3_memory.search.embedder import TextEmbedder

HERE = Path(__file__).parent


def clip(index: int, faces=(), voices=(), matches=()) -> ClipEvidence:
    return ClipEvidence(index, index * 30 * S, (index + 1) * 30 * S, list(faces), list(voices), list(matches))


def build(memory: M3Memory) -> None:
    """Alice (face_1 + voice_1) names herself and likes green tea; voice_2 put the keys in the drawer."""
    memory.ingest(
        clip(0, faces=[face("face_1", 1), face("face_2", 2)],
             voices=[voice("voice_1", 3, 5, "hi, my name is Alice"), voice("voice_1", 6, 8, "I like green tea")],
             matches=[MatchEvidence("face_1", "voice_1", 0.9, 3, 8 * S, 2, 4)])
    )  # fmt: skip
    keys = voice("voice_2", 32, 34, "I put the keys in the drawer")
    memory.ingest(clip(1, faces=[face("face_2", 31)], voices=[keys]))
    memory.ingest(clip(2, faces=[face("face_3", 61)], voices=[voice("voice_3", 62, 64, "the weather is sunny today")]))


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder()


@pytest.fixture
def memory(tmp_path, embedder):
    mem = M3Memory.open(str(tmp_path / "memory"), embedder, search_config=SearchConfig(max_query_chars=200))
    build(mem)
    yield mem
    mem.close()


def test_is_a_memory_client_with_the_service_error_codes():
    from m3_control.ros_memory_client import QUERY_ERRORS as SERVICE_QUERY_ERRORS

    assert isinstance(DirectMemoryClient(None), MemoryClient)
    assert tuple(QUERY_ERRORS) == tuple(SERVICE_QUERY_ERRORS)  # m3_memory.errors == SearchClip constants


def test_search_clip_converts_like_the_service(memory):
    client = DirectMemoryClient(memory)
    clips = client.search_clip("where are the keys?", top_k=2, threshold=0.3, conversation_id="c1")
    records = memory.search.search_clip("where are the keys?", 2, 0.3, -1, "c1")
    assert clips and all(isinstance(c, Clip) for c in clips)
    assert [c.clip_index for c in clips] == [r.clip_index for r in records] == [1]
    for got, record in zip(clips, records, strict=True):
        assert got.score == pytest.approx(record.score)
        nodes = [*record.episodic, *record.semantic]  # episodic first, as ClipMemory lists them
        assert [m.node_id for m in got.memories] == [n.node_id for n in nodes]
        assert [m.text for m in got.memories] == [n.text for n in nodes]
        assert [m.score for m in got.memories] == [pytest.approx(record.node_scores[n.node_id]) for n in nodes]
        assert all(m.clip_index == 1 and isinstance(m.entity_ids, tuple) for m in got.memories)
    assert any("drawer" in m.text for m in clips[0].memories)
    assert client.search_clip("where are the keys?", top_k=2, threshold=0.3, before_clip=0) == []


def test_search_node_and_entity_names(memory):
    client = DirectMemoryClient(memory)
    hits = client.search_node("green tea", kinds=("semantic",), top_k=5)
    assert hits and all(isinstance(h, Memory) and h.kind == "semantic" for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert any("green tea" in h.text for h in hits)
    person = memory.graph.person_of("voice_1")
    assert client.entity_name(person) == "Alice"
    assert client.entity_name("face_1") == "Alice"  # a face of a named person
    assert client.entity_name("voice_3") is None  # known, unnamed
    assert client.entity_name("face_99") is None  # unknown: None, as get_entity's UNKNOWN_ENTITY
    with pytest.raises(MemoryQueryRejected, match="error 1"):
        client.entity_name("")
    # many ids in one lookup: known ids named or "", unknown ones left out; people lists the named persons
    assert client.entity_names(["face_1", "voice_3", "face_99", f"<{person}>"]) == {
        "face_1": "Alice", "voice_3": "", person: "Alice"  # ids come back without their brackets
    }  # fmt: skip
    assert client.entity_names([], people=True) == {person: "Alice"}


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda c: c.search_clip("   "), 1),  # EMPTY_QUERY
        (lambda c: c.search_clip("x" * 201), 2),  # QUERY_TOO_LONG (max_query_chars 200 here)
        (lambda c: c.search_clip("keys", top_k=0), 3),  # INVALID_ARGUMENT
        (lambda c: c.search_clip("keys", threshold=1.5), 3),
        (lambda c: c.search_node("keys", kinds=("gossip",)), 3),
        (lambda c: c.search_node("keys", before_clip=-7), 3),
    ],
)
def test_bad_queries_are_rejected_with_the_service_codes(memory, call, code):
    with pytest.raises(MemoryQueryRejected, match=f"error {code}:"):
        call(DirectMemoryClient(memory))


def test_failures_mean_memory_unavailable(memory, monkeypatch):
    closed = DirectMemoryClient(None, "memory store /x unavailable: disk gone")
    with pytest.raises(MemoryUnavailable, match="error 6: memory store /x unavailable: disk gone"):
        closed.search_clip("keys")
    with pytest.raises(MemoryUnavailable):
        closed.entity_name("face_1")

    client = DirectMemoryClient(memory)

    def store_down(*args, **kwargs):
        raise StoreError("database disk image is malformed")

    def bug(*args, **kwargs):
        raise KeyError("clip 7")

    monkeypatch.setattr(memory.search, "search_clip", store_down)
    with pytest.raises(MemoryUnavailable, match="error 6: database disk image is malformed"):
        client.search_clip("keys")
    monkeypatch.setattr(memory.search, "search_node", bug)
    with pytest.raises(MemoryUnavailable, match="error 255: KeyError"):
        client.search_node("keys")
    result = run_loop("Where are the keys?", ExtractiveReasoner(), client, load_skills(), LoopConfig(max_rounds=3))
    assert result.code == MEMORY_UNAVAILABLE and "malformed" in result.error_message


def test_loop_answers_through_the_direct_client(memory):
    client = DirectMemoryClient(memory)
    skills = load_skills()
    keys = run_loop("Where did someone put the keys?", ExtractiveReasoner(), client, skills, LoopConfig(max_rounds=5))
    assert keys.code == SUCCEEDED and "drawer" in keys.answer.lower(), keys.answer
    assert keys.evidence_ids and all(e.startswith(("episodic_", "semantic_")) for e in keys.evidence_ids)
    tea = run_loop("What does Alice like to drink?", ExtractiveReasoner(), client, skills, LoopConfig(max_rounds=5))
    assert tea.code == SUCCEEDED and "green tea" in tea.answer.lower(), tea.answer
    assert "<" not in tea.answer  # ids rendered as names


def test_parity_with_the_service_path(tmp_path, embedder):
    """The same calls through MemoryNode's services (RosMemoryClient, another process) and directly give
    the same memories, scores (to float32 precision) and errors."""
    memory_dir = tmp_path / "memory"
    built = M3Memory.open(str(memory_dir), embedder)
    build(built)
    person = built.graph.person_of("voice_1")
    built.close()
    calls = [
        ["search_clip", {"query": "where are the keys?", "top_k": 2, "threshold": 0.25, "conversation_id": "p1"}],
        ["search_clip", {"query": f"What does <{person}> like to drink?", "top_k": 2, "threshold": 0.25}],
        ["search_clip", {"query": "sunny weather", "top_k": 3, "threshold": 0.0, "before_clip": 1}],
        ["search_clip", {"query": "keys", "top_k": 2, "threshold": 0.25, "before_stamp_ns": 33 * S}],
        ["search_node", {"query": "green tea", "top_k": 5}],
        ["search_node", {"query": "What is the character id of Alice", "kinds": ["person", "semantic"], "top_k": 5}],
        ["search_clip", {"query": "  "}],
        ["search_node", {"query": "keys", "top_k": 0}],
        ["entity_name", person],
        ["entity_name", "voice_3"],
        ["entity_name", "face_42"],
        ["entity_names", {"entity_ids": ["face_1", "voice_3", "face_42"], "people": True}],
    ]
    calls_file = tmp_path / "calls.json"
    calls_file.write_text(json.dumps(calls))
    done = subprocess.run(
        [sys.executable, str(HERE / "service_parity_peer.py"), str(memory_dir), str(calls_file)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    service = json.loads(done.stdout.strip().splitlines()[-1])

    reopened = M3Memory.open(str(memory_dir), embedder)
    try:
        client = DirectMemoryClient(reopened)
        direct = []
        for name, argument in calls:
            try:
                if name == "entity_name":
                    result = client.entity_name(argument)
                else:
                    if "kinds" in argument:
                        argument = {**argument, "kinds": tuple(argument["kinds"])}
                    result = getattr(client, name)(**argument)
                value = [dataclasses.asdict(r) for r in result] if isinstance(result, list) else result
                direct.append({"result": json.loads(json.dumps(value))})
            except (MemoryQueryRejected, MemoryUnavailable) as error:
                direct.append({"error": type(error).__name__})
    finally:
        reopened.close()

    assert len(service) == len(direct) == len(calls)
    for call, got, want in zip(calls, direct, service, strict=True):
        if "error" in want:
            assert got.get("error") == want["error"], call
            continue
        assert "result" in got, (call, got)
        assert_same(got["result"], want["result"], call)
    assert service[0]["result"] and service[1]["result"]  # the parity is over real hits, not empty lists
    assert service[8]["result"] == "Alice"
    assert service[11]["result"] == {"face_1": "Alice", "voice_3": "", person: "Alice"}


def assert_same(got, want, where) -> None:
    """Equal, except floats to float32 precision (the messages carry float32 scores)."""
    if isinstance(want, float):
        assert got == pytest.approx(want, abs=1e-6), where
    elif isinstance(want, dict):
        assert set(got) == set(want), where
        for key in want:
            assert_same(got[key], want[key], (where, key))
    elif isinstance(want, list):
        assert len(got) == len(want), (where, got, want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w, where)
    else:
        assert got == want, where


def test_locate_object_finds_the_object_of_a_class_seen_last(memory):
    umbrella = ObjectEvidence("object_9", "umbrella", 0.8, (10.0, 10.0, 40.0, 80.0), 91 * S)
    memory.ingest(ClipEvidence(3, 90 * S, 120 * S, objects=[umbrella]))
    client = DirectMemoryClient(memory)
    entity_id, place, stamp_ns = client.locate_object("Umbrella")
    assert (entity_id, place, stamp_ns) == ("object_1", None, 91 * S)  # no pose topic: no place
    with pytest.raises(LookupError, match="cup"):
        client.locate_object("cup")
