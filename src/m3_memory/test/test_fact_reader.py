"""The fact reader's failure paths and its parameter (the model's happy path runs on the real model in
test/test_llm_fact_reader.py): a reply that cannot be used leaves the statement to the rules, said and
counted, and supersession goes on; a reading that names what the statement does not say is refused."""

from __future__ import annotations

import logging

import pytest
from m3mem_evidence import clip, voice

from m3_memory.assembly import make_fact_reader
from m3_memory.memorize.fact_reader import FactReaderError, ModelFactReader
from m3_memory.memorize.openai_compatible import OpenAIMemorizer
from m3_memory.memory import Memory


def reader(reply: str | Exception) -> ModelFactReader:
    def post(body: dict) -> str:
        assert body["messages"][1]["content"]  # the statement itself is sent
        if isinstance(reply, Exception):
            raise reply
        return reply

    return ModelFactReader(post, "test-model")


@pytest.mark.parametrize(
    "reply",
    [
        "I think it is about keys.",  # no JSON
        '{"kind": "where", "thing": "keys", "value": "shelf"}',  # no such kind
        '{"kind": "place", "thing": "passport", "value": "shelf"}',  # a thing the statement does not name
        '{"kind": "place", "thing": "keys", "value": "garage"}',  # a place it does not name
        TimeoutError("timed out"),
        ConnectionRefusedError(111, "refused"),
    ],
)
def test_an_unusable_reading_is_an_error(reply):
    with pytest.raises(FactReaderError):
        reader(reply).facts("I moved the keys to the shelf in the hall")


def test_a_reading_is_normalised_and_kept():
    read = reader('{"kind": "place", "thing": "the keys", "value": "on the shelf"}')
    facts = read.facts("I moved the keys to the shelf in the hall")
    assert [(f.subject, f.slot, f.value) for f in facts] == [("keys", "location", "shelf")]
    assert read.facts("I moved the keys to the shelf in the hall") == facts and read.reads == 1  # cached
    assert reader('{"kind": "none", "thing": "", "value": ""}').facts("where are the keys?") == []


def test_a_reader_that_fails_leaves_supersession_to_the_rules(tmp_path, embedder, caplog):
    memory = Memory.open(str(tmp_path / "m"), embedder)
    memory.fact_reader = reader("not json at all")
    try:
        memory.ingest(clip(0, voices=[voice("voice_1", 10, 13, "I put the keys in the kitchen drawer")]))
        with caplog.at_level(logging.WARNING, logger="m3_memory.memory"):
            memory.ingest(clip(1, voices=[voice("voice_2", 40, 43, "I moved the keys to the shelf in the hall")]))
        drawer = next(n for n in memory.graph.text.values() if "kitchen drawer" in n.text and n.kind == "episodic")
        assert drawer.superseded_by  # the rules read both statements
        assert memory.fact_reader_failures >= 1
        assert "the rules read it" in caplog.text
    finally:
        memory.close()


def test_the_parameter_chooses_the_reader():
    model = OpenAIMemorizer("http://127.0.0.1:9/v1", "m")
    assert isinstance(make_fact_reader({"fact_reader": "auto"}, model), ModelFactReader)
    assert make_fact_reader({"fact_reader": "rules"}, model) is None
    assert make_fact_reader({"fact_reader": "auto"}, None) is None  # the rules memorizer
    with pytest.raises(ValueError, match="needs memorizer 'openai'"):
        make_fact_reader({"fact_reader": "model"}, None)
    with pytest.raises(ValueError, match="'auto', 'rules' or 'model'"):
        make_fact_reader({"fact_reader": "llm"}, model)


def test_a_new_statement_the_rules_read_nothing_in_is_sent_and_its_reading_supersedes(tmp_path, embedder):
    """A new memory the rules find no fact in but that names a place goes to the reader first, and the
    older memories near what it read follow; what the reader reads there is compared as the rules'
    facts are. (Which texts are sent, and what is done with a reading: the model itself is in the root
    test/test_llm_fact_reader.py.)"""
    sent: list[str] = []

    def post(body: dict) -> str:
        text = body["messages"][1]["content"]
        sent.append(text)
        if "hangs by" in text:
            return '{"kind": "place", "thing": "umbrella", "value": "by the back door"}'
        if "umbrella" in text:
            return '{"kind": "place", "thing": "umbrella", "value": "in the hall cupboard"}'
        return '{"kind": "none", "thing": "", "value": ""}'

    memory = Memory.open(str(tmp_path / "m"), embedder)
    memory.fact_reader = ModelFactReader(post, "test-model")
    try:
        memory.ingest(clip(0, voices=[voice("voice_1", 10, 13, "I put the umbrella in the hall cupboard")]))
        memory.ingest(clip(1, voices=[voice("voice_2", 40, 43, "The umbrella hangs by the back door now")]))
        assert any("hangs by" in t for t in sent)  # the rules read nothing in it: it is sent all the same
        cupboard = next(n for n in memory.graph.text.values() if "hall cupboard" in n.text and n.kind == "episodic")
        back_door = next(n for n in memory.graph.text.values() if "back door" in n.text and n.kind == "episodic")
        assert cupboard.superseded_by == back_door.node_id and memory.fact_reader_failures == 0
    finally:
        memory.close()
