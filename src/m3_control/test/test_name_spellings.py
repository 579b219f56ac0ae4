"""A name the user spells differently from memory (speech recognition wrote it as it heard it) still
finds the person, and the answer uses the user's spelling; a name memory knows exactly stays that
person's. Real m3_memory Memory (MiniLM embedder, rules memorizer), extractive reasoner; names and
lines written for this test, not taken from any episode."""

from __future__ import annotations

import pytest
from test_direct_memory_client import MatchEvidence, S, clip, face, voice

from m3_control.direct_memory_client import DirectMemoryClient
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import SUCCEEDED, LoopConfig, run_loop
from m3_control.names import asker_spellings, respelt
from m3_control.skills import load_skills
from m3_memory.memory import Memory as M3Memory
from m3_memory.search.embedder import TextEmbedder


@pytest.fixture(scope="module")
def embedder() -> TextEmbedder:
    return TextEmbedder()


@pytest.fixture
def memory(tmp_path, embedder):
    """Heard as "Katrin" (the user writes Catherine) she repairs clocks; "Mario" and "Maria" are two people."""
    mem = M3Memory.open(str(tmp_path / "memory"), embedder)
    mem.ingest(
        clip(0, faces=[face("face_1", 1)],
             voices=[voice("voice_1", 2, 4, "Hello, I'm Katrin."), voice("voice_1", 5, 8, "I repair old clocks.")],
             matches=[MatchEvidence("face_1", "voice_1", 0.9, 3, 8 * S, 2, 4)])
    )  # fmt: skip
    mem.ingest(clip(1, voices=[voice("voice_2", 31, 33, "Hi, I'm Mario. I drive the school bus.")]))
    mem.ingest(clip(2, voices=[voice("voice_3", 61, 63, "Hello, I'm Maria. I teach the violin.")]))
    yield mem
    mem.close()


def test_memory_finds_the_person_under_another_spelling_and_keeps_exact_names(memory):
    katrin = memory.graph.person_of("voice_1")
    assert memory.search.get_entity("voice_1").name == "Katrin"
    assert [h.node_id for h in memory.search.search_node("What does Katrin do?", kinds=["person"])] == [katrin]
    assert [h.node_id for h in memory.search.search_node("What does Catrin do?", kinds=["person"])] == [katrin]
    mario, maria = memory.graph.person_of("voice_2"), memory.graph.person_of("voice_3")
    assert [h.node_id for h in memory.search.search_node("What does Mario drive?", kinds=["person"])] == [mario]
    assert [h.node_id for h in memory.search.search_node("What does Maria teach?", kinds=["person"])] == [maria]
    assert memory.search.respelled("Where does Catrin work?") == "Where does Katrin work?"
    assert memory.search.respelled("Where does Mario work?") == "Where does Mario work?"
    # search_clip embeds the query as asked and as memory spells it
    assert memory.search.query_variants("Where does Catrin work?") == [
        "Where does Catrin work?",
        "Where does Katrin work?",
    ]
    assert [c.clip_index for c in memory.search.search_clip("What does Catrin repair?", 1, 0.0)] == [0]


def test_the_answer_uses_the_askers_spelling(memory):
    result = run_loop(
        "What does Catrin repair?", ExtractiveReasoner(), DirectMemoryClient(memory), load_skills(), LoopConfig()
    )
    assert result.code == SUCCEEDED, result.error_message
    assert "clocks" in result.answer and "Catrin" in result.answer and "Katrin" not in result.answer, result.answer


def test_a_name_memory_knows_exactly_is_never_respelt():
    assert asker_spellings("What does Mario drive?", {"Maria", "Mario"}, ["Maria", "Mario"]) == {}
    assert asker_spellings("What does Mario drive?", {"Maria"}, ["Maria"]) == {"Maria": "Mario"}
    assert asker_spellings("Where is the Kitchen?", {"Kitchin"}, []) == {"Kitchin": "Kitchen"}  # a word, as spelt
    assert asker_spellings("What does Bob like?", {"Rob"}, []) == {}  # short names: exact only
    assert respelt("Katrin's clocks; Katrina's", {"Katrin": "Catrin"}) == "Catrin's clocks; Katrina's"
