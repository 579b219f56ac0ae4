"""Whose name was said: the turns place a (line, name, whose) the model read (name_mentions), and
the memorizer counts every placed mention as a vote, so a misheard name is outvoted."""

from __future__ import annotations

import json

from m3mem_evidence import clip, face, match, voice
from test_memory_openai_memorizer import server_factory  # noqa: F401  (a fixture)

from m3_memory.memory import Memory
from m3_memory.name_mentions import Turns, labelled_text, resolve_mentions
from m3_memory.openai_memorizer import OpenAIMemorizer


def turns(speakers: list[str], seen: list[list[str]] | None = None, same: dict[str, str] | None = None) -> Turns:
    group = {e: (same or {}).get(e, e) for e in [*speakers, *(e for s in seen or [] for e in s)]}
    return Turns(speakers, seen or [[] for _ in speakers], ["..."] * len(speakers), group)


def test_the_speaker_listener_and_introduced_follow_the_turns():
    t = turns(["voice_1", "voice_2", "voice_1", "voice_3"])
    assert t.whose(1, "self") == "voice_1"
    assert t.whose(1, "addressed") == "voice_2"  # "Ines, did you...?": the one who answers
    assert t.whose(3, "addressed") == "voice_3"  # the next other speaker, not the one before
    assert t.whose(4, "addressed") == "voice_1"  # nobody talks after: the one who talked before
    assert t.whose(0, "self") is None and t.whose(5, "addressed") is None and t.whose(1, "boss") is None


def test_someone_introduced_is_not_the_listener_of_that_line():
    t = turns(["voice_1", "voice_2", "voice_3"])  # "Ines, this is Pavel." / "Hello!" / "Hi Ines."
    placed = resolve_mentions(t, [(1, "Pavel", "introduced"), (1, "Ines", "addressed")])
    assert sorted(placed) == [(1, "Ines", "voice_2"), (1, "Pavel", "voice_3")]


def test_one_person_under_two_labels_is_not_somebody_else():
    t = turns(["voice_1", "voice_4", "voice_2"], same={"voice_4": "voice_1"})
    assert t.whose(1, "addressed") == "voice_2"


def test_without_other_speakers_the_one_other_person_seen_is_meant():
    alone = turns(["voice_1"], seen=[["face_2"]], same={"voice_1": "face_1"})
    assert alone.whose(1, "introduced") == "face_2" and alone.whose(1, "addressed") == "face_2"
    crowd = turns(["voice_1"], seen=[["face_2", "face_3"]])
    assert crowd.whose(1, "addressed") is None  # two people seen, nobody answers: it cannot be told
    nobody = turns(["voice_1"])
    assert nobody.whose(1, "introduced") is None


def test_names_in_facts_become_labels_whole_words_only():
    names = {"Ines": "voice_2", "Ines Moreau": "voice_2", "Bo": "face_1"}
    assert labelled_text("Ines Moreau likes Bo's bike.", names) == "<voice_2> likes <face_1>'s bike."
    assert labelled_text("Bobby and Inesa met <voice_2>.", names) == "Bobby and Inesa met <voice_2>."


def test_a_misheard_self_introduction_is_outvoted_and_facts_follow_the_person(tmp_path, server_factory):  # noqa: F811
    from m3_memory.embedder import TextEmbedder

    first = clip(
        0,
        faces=[face("face_1", 1.0), face("face_2", 1.0)],
        voices=[
            voice("voice_1", 2, 4, "Hi, I am Tova, I repair clocks."),
            voice("voice_2", 6, 8, "Nice to meet you, Tove."),
        ],
        matches=[match("face_1", "voice_1", 4), match("face_2", "voice_2", 4)],
    )
    second = clip(
        1,
        faces=[face("face_1", 31.0), face("face_2", 31.0)],
        voices=[
            voice("voice_2", 32, 34, "Tove, could you look at the kitchen clock?"),
            voice("voice_1", 36, 38, "Sure, after lunch."),
        ],
        matches=[match("face_1", "voice_1", 4), match("face_2", "voice_2", 4)],
    )
    replies = [
        {
            "names": [{"line": 1, "name": "Tova", "whose": "self"}, {"line": 2, "name": "Tove", "whose": "addressed"}],
            "semantic": ["Tova repairs clocks."],
            "episodic": [],
        },
        {"names": [{"line": 1, "name": "Tove", "whose": "addressed"}], "semantic": [], "episodic": []},
    ]
    server = server_factory([json.dumps(r) for r in replies])
    mem = Memory.open(str(tmp_path / "m"), TextEmbedder(), memorizer=OpenAIMemorizer(server.url, "m", timeout_s=5))
    record = mem.ingest(first)
    assert "<voice_1> repairs clocks." in [n.text for n in record.semantic]  # the person, not the spelling
    assert mem.search.get_entity("voice_1").name == "Tova"  # one vote each: the first name stays
    mem.ingest(second)
    assert mem.search.get_entity("face_1").name == "Tove"  # two votes to one
    assert mem.search.get_entity("face_2").name == ""
    mem.close()
