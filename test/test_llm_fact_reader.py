"""The fact reader on the real embedded model (llama.cpp serving Qwen2.5-Coder-1.5B, as `--llm
embedded` runs it): statements the rules cannot read ("hangs by", "stuck … on") are read, so the newer
statement supersedes them in memory, and a newer statement only the model reads replaces an older one;
questions, negations, corrections and other things supersede nothing. The pairs are phrasings of the
rules' held-out set (src/m3_memory/test/test_fact_changes.py), none of them in the reader's prompt."""

from __future__ import annotations

import pytest

from m3_memory.graph.fact_changes import facts_of, supersedes
from m3_memory.graph.records import ClipEvidence, VoiceEvidence
from m3_memory.memorize.openai_compatible import OpenAIMemorizer
from m3_memory.memory import Memory

S = 1_000_000_000
UNREAD_BY_RULES = [  # (older, newer): the rules read nothing in the older statement
    ("The dog leash hangs by the front door.", "Someone moved the dog leash into the garage."),
    ("I stuck the receipt on the fridge", "the receipt is now inside my wallet"),
]
NOT_REPLACED = [  # (older, newer): the newer one states no other place or time of the same thing
    ("the scissors are in the drawer", "the tape is in the drawer"),
    (
        '<voice_1> says: "my glasses are on the nightstand"',
        '<voice_2> says: "have you seen my glasses on the dresser?"',
    ),
    ("the charger is under the desk", '<voice_3> says: "the charger isn\'t under the desk anymore"'),
    ("Tom's jacket is on the chair", "Lena's jacket is in the hallway"),
]


@pytest.fixture(scope="module")
def reader(llm_server):
    return OpenAIMemorizer(llm_server.base_url, llm_server.model, timeout_s=120.0).fact_reader()


def replaced(read, older: str, newer: str) -> bool:
    return any(supersedes(new, old) for new in read(newer) for old in read(older))


@pytest.mark.parametrize(("older", "newer"), UNREAD_BY_RULES)
def test_the_model_reads_what_the_rules_cannot(reader, older, newer):
    assert not replaced(facts_of, older, newer)  # the rules miss it
    assert replaced(reader.facts, older, newer)


@pytest.mark.parametrize(("older", "newer"), NOT_REPLACED)
def test_the_model_reading_replaces_nothing_that_still_holds(reader, older, newer):
    assert not replaced(reader.facts, older, newer)


def _said(index: int, text: str) -> ClipEvidence:
    t0 = index * 30.0
    line = VoiceEvidence("voice_1", int((t0 + 2) * S), int((t0 + 5) * S), text, 0.9, [], index)
    return ClipEvidence(index, int(t0 * S), int((t0 + 30) * S), [], [line], [])


# (older, newer, a word of each): the rules read nothing in one of the two statements
ONLY_THE_MODEL_READS = [
    ("The dog leash hangs by the front door.", "I moved the dog leash into the garage.", "front door", "garage"),
    # the newer one: sent because it names a place (fact_changes.may_state_fact)
    ("I put the umbrella in the hall cupboard.", "The umbrella hangs by the back door now.", "cupboard", "back door"),
]


@pytest.mark.parametrize("with_model", [True, False])
@pytest.mark.parametrize(("older_text", "newer_text", "older_word", "newer_word"), ONLY_THE_MODEL_READS)
def test_memory_marks_an_older_statement_only_the_model_can_read(
    tmp_path, reader, with_model, older_text, newer_text, older_word, newer_word
):
    assert not facts_of(older_text) or not facts_of(newer_text)  # the rules alone have nothing to compare
    memory = Memory.open(str(tmp_path / "m"), fact_reader=reader if with_model else None)
    try:
        memory.ingest(_said(0, older_text))
        memory.ingest(_said(1, newer_text))
        older = next(n for n in memory.graph.text.values() if older_word in n.text and n.kind == "episodic")
        newer = next(n for n in memory.graph.text.values() if newer_word in n.text and n.kind == "episodic")
        assert older.superseded_by == (newer.node_id if with_model else "")
        assert memory.fact_reader_failures == 0
    finally:
        memory.close()
