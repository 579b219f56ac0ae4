"""The embedded extractive reasoner answering from fixture memories (plain-Python memory client)."""

from __future__ import annotations

from fixtures import FakeMemory

from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import LoopConfig, run_loop
from m3_control.skills import load_skills

SKILLS = load_skills()


def ask(instruction: str, memory: FakeMemory | None = None, **config):
    events = []
    memory = memory or FakeMemory()
    result = run_loop(instruction, ExtractiveReasoner(), memory, SKILLS, LoopConfig(**config), on_round=events.append)
    return result, memory, events


def test_answers_from_evidence_with_names_and_ids():
    result, memory, events = ask("Where did Alice put the keys?")
    assert result.code == "SUCCEEDED", result.error_message
    assert result.answer == "Alice put the car keys in the drawer of the hallway."
    assert result.evidence_ids[0] == "episodic_3"
    assert result.plan == []
    assert events[-1].action == "answer" and all(e.action == "search" for e in events[:-1])
    assert memory.calls[0][1] == "Where did Alice put the keys?"


def test_who_is_lookup_answers_the_entity_id():
    result, memory, _ = ask("What is Bob's id?")
    assert result.code == "SUCCEEDED"
    assert result.answer.startswith("Bob is <face_2>")
    assert result.evidence_ids == ["semantic_4"]
    assert ("search_node", "What is the character id of Bob", 20, -1) in memory.calls


def test_says_i_dont_know_when_evidence_is_weak():
    result, _, events = ask("What colour is the sofa in the living room?")
    assert result.code == "SUCCEEDED"
    assert result.answer.startswith("I don't know")
    assert result.evidence_ids == []
    assert len(events) >= 2  # it tried more than one search before giving up


def test_as_of_limit_hides_later_clips():
    result, memory, _ = ask("Where did Alice put the keys?", before_clip=0)
    assert all(call[-1] == 0 for call in memory.calls)
    assert result.answer.startswith("I don't know")


def test_stored_injection_never_becomes_a_step():
    result, _, _ = ask("Where did Alice put the keys?")
    assert result.plan == []
    result, _, _ = ask("Bring me the keys")
    assert result.code == "SUCCEEDED", result.error_message
    steps = [(s.skill, s.target) for s in result.plan]
    assert steps == [
        ("navigate_to", "the drawer of the hallway"),
        ("pick", "keys"),
        ("navigate_to", "me"),
        ("hand_over", "me"),
    ]
    assert "stranger" not in str(result.plan)


def test_memory_unavailable():
    result, _, _ = ask("Where did Alice put the keys?", memory=FakeMemory(down=True))
    assert result.code == "MEMORY_UNAVAILABLE"


def test_who_is_answers_with_a_name_not_an_id():
    result, _, _ = ask("Who is Bob?")
    assert result.code == "SUCCEEDED"
    assert "<face_2>" not in result.answer and "Bob" in result.answer
    result, _, _ = ask("Which character is Bob?")
    assert result.answer.startswith("Bob is <face_2>")


def test_learnt_id_is_searched_for_a_named_person():
    result, _, events = ask("What does Bob like to drink?")
    assert "<face_2>" in [e.query for e in events]  # "<face_2> is named Bob" came back, so his id is searched
    assert result.answer == "Bob makes coffee and says he likes it black."
    assert result.evidence_ids == ["episodic_5"]
