"""Whose name was said: the turns place a (line, name, whose) the cue words or the model read
(name_mentions), the cue words' reading wins, an uncertain speaker names nobody, facts said with a
name go to its person, and the memorizer counts every placed mention as a vote, so a misheard name
is outvoted."""

from __future__ import annotations

import json

import pytest
from m3mem_evidence import clip, face, match, voice
from test_memory_openai_memorizer import server_factory  # noqa: F401  (a fixture)

from m3_memory.memorize.name_mentions import Turns, labelled_text, merge_mentions, resolve_mentions
from m3_memory.memorize.openai_compatible import OpenAIMemorizer, said_name
from m3_memory.memorize.rules import RulesMemorizer
from m3_memory.memory import Memory


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


def test_someone_introduced_is_not_whoever_talked_before():
    """An introduction presents someone new to the talk, who answers it: the clip's last line
    ("Reception, this is Doctor Tanaka.") names nobody who spoke before it."""
    last = turns(["voice_2", "voice_3"])
    assert last.whose(2, "introduced") is None and last.whose(2, "addressed") == "voice_2"
    seen = turns(["voice_2", "voice_1"], seen=[[], ["face_3"]])  # one other person in view
    assert seen.whose(2, "introduced") == "face_3"


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
    from m3_memory.search.embedder import TextEmbedder

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


def test_an_uncertain_speaker_gives_no_name_and_takes_none():
    t = turns(["", "voice_1", "voice_2"])
    assert [t.whose(1, role) for role in ("self", "addressed", "introduced")] == [None, None, None]
    answered = turns(["voice_1", "", "voice_2"])  # "Diego, ...?" / (unclear: "mm-hm") / "sure"
    assert answered.whose(1, "addressed") is None  # the one who answered cannot be told
    assert turns(["voice_1", "voice_2"]).whose(1, "mentioned") is None  # someone absent: nobody here


def test_the_cue_words_role_wins_and_the_model_adds_what_they_did_not_read():
    cues = [(1, "Omar", "addressed"), (2, "Yusuf", "mentioned")]
    model = [(1, "omar", "self"), (2, "Yusuf Okoye", "addressed"), (3, "Lina", "self")]
    texts = ["Omar, did you lock up?", "Yusuf Okoye called.", "Lina here, I'm at the door."]
    assert merge_mentions(cues, model, texts) == [*cues, (3, "Lina", "self")]


def test_a_model_reading_of_the_speakers_own_name_needs_the_first_person():
    """Two names called out ("Ravi, Sunita, lift the table") name no speaker, whatever the model says;
    "here" after a comma calls someone over ("Sunita, come here"), right after the name it announces them."""
    texts = ["Ravi, Sunita, lift the table.", "They call me Sunita.", "Sunita speaking.", "Good, Sunita.",
             "Sunita, come here.", "Sunita here, at the gate.", "Hello dear, Sunita, this is Jonas, my husband.",
             "It's me, Sunita.", "Sunita, that's me.", "I told you, we need more chairs. Sunita, sit."]  # fmt: skip
    model = [(line, "Sunita", "self") for line in range(1, 11)]
    kept = merge_mentions([], [*model, (19, "Sunita", "self")], texts)
    assert [line for line, _, _ in kept] == [2, 3, 6, 8, 9]  # a word for the speaker next to the name


def test_a_name_said_to_someone_else_is_not_the_speakers():
    t = turns(["voice_1", "voice_2", "voice_3"])  # "Meet Chiara." / "Hi Chiara!" / "Thanks."
    placed = resolve_mentions(t, [(1, "Chiara", "introduced"), (2, "Chiara", "addressed")])
    assert placed == [(2, "Chiara", "voice_3")]


def _served(server_factory, reply: dict) -> OpenAIMemorizer:  # noqa: F811
    return OpenAIMemorizer(server_factory([json.dumps(reply)]).url, "m", timeout_s=5)


def test_the_model_path_places_what_the_cue_words_read_whatever_the_model_says(server_factory):  # noqa: F811
    evidence = clip(
        0,
        faces=[face("face_1", 1.0), face("face_2", 1.0)],
        voices=[
            voice("voice_1", 2, 4, "Omar, did you read the note? Tell Yusuf I called."),
            voice("voice_2", 6, 8, "Yes, I read it."),
        ],
        matches=[match("face_1", "voice_1", 4), match("face_2", "voice_2", 4)],
    )
    ids = {e: e for e in ("face_1", "face_2", "voice_1", "voice_2")}
    wrong = {  # what the 1.5B model answered alone: the addressed name as the speaker's, an absent one addressed
        "names": [{"line": 1, "name": "Omar", "whose": "self"}, {"line": 1, "name": "Yusuf", "whose": "addressed"}],
        "semantic": [],
        "episodic": [],
    }
    out = _served(server_factory, wrong).memorize(evidence, ids, lambda e: None)
    assert out.names == [("voice_2", "Omar")]
    assert out.names == RulesMemorizer().memorize(evidence, ids, lambda e: None).names


def test_uncertain_lines_are_kept_as_said_and_name_nobody(server_factory):  # noqa: F811
    evidence = clip(
        0,
        faces=[face("face_1", 1.0), face("face_2", 1.0)],
        voices=[voice("", 2, 3, "I'm Tomasz.", seed=999), voice("voice_1", 4, 6, "Sorry, I missed that.")],
        matches=[match("face_1", "voice_1", 4)],
    )
    ids = {e: e for e in ("face_1", "face_2", "voice_1")}
    rules = RulesMemorizer().memorize(evidence, ids, lambda e: None)
    assert rules.names == [] and 'Someone (voice unclear) says: "I\'m Tomasz."' in [d.text for d in rules.drafts]
    reply = {"names": [{"line": 1, "name": "Tomasz", "whose": "self"}], "semantic": [], "episodic": []}
    assert _served(server_factory, reply).memorize(evidence, ids, lambda e: None).names == []


@pytest.mark.parametrize("model", [False, True])
def test_a_job_said_with_a_name_goes_to_that_names_person(server_factory, model):  # noqa: F811
    evidence = clip(
        0,
        faces=[face("face_1", 1.0), face("face_2", 1.0), face("face_3", 1.0)],
        voices=[
            voice("voice_1", 2, 4, "Good morning, I'm Ana, the new nurse."),
            voice("voice_3", 6, 8, "This is Ben, he fixes the bikes."),
            voice("voice_2", 10, 12, "Hello, Ana."),
        ],
        matches=[match(f"face_{k}", f"voice_{k}", 4) for k in (1, 2, 3)],
    )
    ids = {f"{kind}_{k}": f"{kind}_{k}" for kind in ("face", "voice") for k in (1, 2, 3)}
    if model:  # the model's facts on the wrong people, as a small model writes them
        reply = {"names": [], "semantic": ["<voice_3> fixes the bikes.", "<voice_2> is the new nurse."], "episodic": []}
        out = _served(server_factory, reply).memorize(evidence, ids, lambda e: None)
    else:
        out = RulesMemorizer().memorize(evidence, ids, lambda e: None)
    texts = [d.text for d in out.drafts]
    assert ("voice_1", "Ana") in out.names and ("voice_2", "Ben") in out.names and ("voice_3", "Ana") not in out.names
    assert "<voice_1> is the new nurse." in texts and "<voice_2> fixes the bikes." in texts
    assert "<voice_3> fixes the bikes." not in texts and "<voice_2> is the new nurse." not in texts


def test_memory_keeps_an_uncertain_line_without_making_a_voice_or_a_name(tmp_path, embedder):
    evidence = clip(
        0,
        faces=[face("face_1", 1.0)],
        voices=[voice("", 2, 3, "I'm Tomasz, from accounts.", seed=999), voice("voice_1", 4, 6, "Hello there.")],
        matches=[match("face_1", "voice_1", 4)],
    )
    mem = Memory.open(str(tmp_path / "m"), embedder)
    record = mem.ingest(evidence)
    assert 'Someone (voice unclear) says: "I\'m Tomasz, from accounts."' in [m.text for m in record.episodic]
    assert sorted(e for e in record.entity_ids if not e.startswith("person")) == ["face_1", "voice_1"]
    assert mem.search.get_entity("face_1").name == "" and mem.search.get_entity("voice_1").name == ""
    mem.close()


def test_a_name_called_to_someone_the_next_speaker_answers_for_is_not_theirs():
    t = Turns(["voice_1", "voice_2"], [[], []], ["Zeynep! Your bus leaves soon!", "She's still asleep."], {})
    assert t.whose(1, "addressed") is None
    t.texts[1] = "Coming, give me a minute."
    assert t.whose(1, "addressed") == "voice_2"


def test_kinship_words_the_model_offers_are_no_names():
    assert said_name("Mum", ["okay mum"]) is None and said_name("Yuki", ["yuki can you feed the cat"]) == "Yuki"
