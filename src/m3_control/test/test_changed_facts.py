"""The loop answers with what was true at the question's as-of time, on a real memory (MiniLM embedder,
rules memorizer) where a newer statement replaced an older one (m3_memory's graph/fact_changes.py): asked
before the change, the old fact; asked after, the new one."""

from __future__ import annotations

import numpy as np
import pytest

from m3_control.direct_memory_client import DirectMemoryClient
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import SUCCEEDED, LoopConfig, run_loop
from m3_control.skills import load_skills
from m3_memory.graph.records import ClipEvidence, VoiceEvidence
from m3_memory.memory import Memory as M3Memory
from m3_memory.search.embedder import TextEmbedder

S = 1_000_000_000


def said(index: int, voice_id: str, at_s: int, text: str) -> ClipEvidence:
    vector = np.random.default_rng(int(voice_id[-1])).normal(size=192)
    utterance = VoiceEvidence(voice_id, at_s * S, (at_s + 3) * S, text, 0.9, list(vector / np.linalg.norm(vector)))
    return ClipEvidence(index, index * 30 * S, (index + 1) * 30 * S, voices=[utterance])


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    m = M3Memory.open(str(tmp_path_factory.mktemp("changes") / "m"), TextEmbedder())
    m.ingest(said(0, "voice_1", 10, "I put the keys in the kitchen drawer"))
    m.ingest(said(1, "voice_1", 40, "the team meeting is on Thursday"))
    m.ingest(said(2, "voice_2", 70, "I moved the keys to the shelf in the hall"))
    m.ingest(said(3, "voice_1", 100, "the team meeting was moved to Friday"))
    yield DirectMemoryClient(m)
    m.close()


@pytest.mark.parametrize(
    ("question", "as_of_s", "expected"),
    [
        ("Where are the keys?", 0, "shelf"),
        ("Where are the keys?", 50, "drawer"),
        ("When is the team meeting?", 0, "Friday"),
        ("When is the team meeting?", 90, "Thursday"),
    ],
)
def test_the_loop_answers_with_what_was_true_then(memory, question, as_of_s, expected):
    config = LoopConfig(max_rounds=3, before_stamp_ns=as_of_s * S)
    result = run_loop(question, ExtractiveReasoner(), memory, load_skills(), config)
    assert result.code == SUCCEEDED and expected in result.answer, result.answer


def test_a_replaced_statement_keeps_its_text_and_reasoners_read_the_note(memory):
    from m3_control.loop import knowledge_message
    from m3_control.memory_client import shown_text

    clips = memory.search_clip("Where are the keys?", top_k=3, threshold=0.0)
    old = next(m for c in clips for m in c.memories if "kitchen drawer" in m.text)
    assert old.superseded_by and old.text.endswith('drawer"')  # the stored text is as said
    assert shown_text(old).endswith(f"(no longer true: replaced by {old.superseded_by})")
    assert shown_text(old) in knowledge_message(clips, []).replace('\\"', '"')
    before = memory.search_clip("Where are the keys?", top_k=3, threshold=0.0, before_stamp_ns=50 * S)
    old_then = next(m for c in before for m in c.memories if "kitchen drawer" in m.text)
    assert not old_then.superseded_by and shown_text(old_then) == old_then.text  # not yet replaced then
