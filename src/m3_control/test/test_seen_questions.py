"""Questions only seeing can answer (issue 23, part 5), asked through the loop on a real memory (MiniLM
embedder, rules memorizer) that stored what perception saw: a note's words and what a named person was
seen with. Nothing here was said aloud about the note or the umbrella."""

from __future__ import annotations

import pytest
from evidence_builders import S, face, unit

from m3_control.direct_memory_client import DirectMemoryClient
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import SUCCEEDED, LoopConfig, run_loop
from m3_control.skills import load_skills
from m3_memory.graph.records import (
    ClipEvidence,
    MatchEvidence,
    ObjectEvidence,
    TextEvidence,
    VoiceEvidence,
)
from m3_memory.memory import Memory as M3Memory
from m3_memory.search.embedder import TextEmbedder


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    m = M3Memory.open(str(tmp_path_factory.mktemp("seen") / "m"), TextEmbedder())
    hello = VoiceEvidence("voice_1", 2 * S, 4 * S, "Hi, I'm Priya. I'm off to work now.", 0.9, unit(1001, 192), 20)
    m.ingest(
        ClipEvidence(
            0, 0, 30 * S, [face("face_1", 2.0), face("face_1", 12.0)], [hello],
            [MatchEvidence("face_1", "voice_1", 0.9, 3, 4 * S, 2, 4)],
            objects=[ObjectEvidence("object_1", "umbrella", 0.6, (100.0, 80.0, 40.0, 120.0), 12 * S)],
        )
    )  # fmt: skip
    note = TextEvidence("text_1", "Plumber comes Friday at 10", 0.97, (20.0, 300.0, 260.0, 40.0), 41 * S)
    m.ingest(ClipEvidence(1, 30 * S, 60 * S, texts=[note]))
    # Priya takes the book from the table: first beside her, then in the box of her body, below her face
    times = [61.0 + 0.5 * k for k in range(6)]
    boxes = [(300.0, 380.0, 40.0, 30.0)] * 2 + [(10.0, 150.0, 30.0, 30.0)] * 4
    m.ingest(
        ClipEvidence(
            2, 60 * S, 90 * S, [face("face_1", t) for t in times],
            objects=[ObjectEvidence("object_2", "book", 0.5, b, int(t * S)) for t, b in zip(times, boxes, strict=True)],
        )
    )  # fmt: skip
    yield DirectMemoryClient(m)
    m.close()


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What does the note say?", "Plumber comes Friday at 10"),
        ("When is the plumber coming?", "Friday at 10"),
        ("What was Priya seen with?", "umbrella"),
        ("What was Priya carrying?", "book"),  # the latest thing she had in hand: picked up at 61 s
        ("Who picked up the book?", "Priya"),
    ],
)
def test_seen_things_answer_questions(memory, question, expected):
    result = run_loop(question, ExtractiveReasoner(), memory, load_skills(), LoopConfig(max_rounds=3))
    assert result.code == SUCCEEDED and expected in result.answer, result.answer


NOTE = "Dentist Wednesday 4 pm"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Where did Priya leave the book?", "Priya puts down a book. (seen in the kitchen)"),
        ("Where is the cup?", "A cup is seen. (seen in the living room)"),
        ("What does the note in the kitchen say?", f'A written note or sign says: "{NOTE}"'),  # not a said "note"
        # "near" a person is no place: the room still answers (the name is not among this memory's evidence)
        ("Where is the vase now?", "someone whose name I don't know is seen near a vase. (seen in the kitchen)"),
    ],
)
def test_where_a_thing_was_seen_is_the_room_the_robot_was_in(question, expected):
    """A seen line names no place itself: the room of the robot's pose when it was seen answers."""
    from fixtures import FakeMemory

    from m3_control.memory_client import Memory
    from m3_memory.graph.records import Place

    priya = ("face_1",)
    kitchen, living = Place("map", 1.0, 2.0, 0.0, "kitchen"), Place("map", 5.0, 2.0, 0.0, "living room")
    clips = [
        (0, [Memory("episodic_1", "episodic", "<face_1> puts down a book.", 0, entity_ids=("face_1",), place=kitchen)]),
        (0, [Memory("semantic_2", "semantic", "<face_1> is named Priya.", 0, entity_ids=("face_1",))]),
        (1, [Memory("episodic_3", "episodic", "A cup is seen.", 1, place=living)]),
        (2, [Memory("episodic_4", "episodic", "<face_1> is seen near a vase.", 2, entity_ids=priya, place=kitchen)]),
        (1, [Memory("episodic_5", "episodic", f'A written note or sign says: "{NOTE}"', 1, place=kitchen)]),
        # later, a said line with the same words: a note mentioned is not what a note says
        (3, [Memory("episodic_6", "episodic", '<face_1> says: "I left a note for the plumber."', 3, place=kitchen)]),
    ]  # fmt: skip
    result = run_loop(question, ExtractiveReasoner(), FakeMemory(clips), load_skills(), LoopConfig(max_rounds=3))
    assert result.code == SUCCEEDED and result.answer == expected, result.answer


def test_an_object_entity_is_no_answer_to_what_is_asked_about_it():
    """An object entity says only its class ("cat"), a word the question already has: the rules never quote it
    as the answer (a replay answered "What is the cat afraid of?" with "object_8 is an object: cat.")."""
    from fixtures import FakeMemory

    from m3_control.memory_client import Memory

    clips = [
        (0, [Memory("object_8", "object", "object_8 is an object: dog", 0)]),
        (1, [Memory("episodic_2", "episodic", "Lunch is at noon.", 1)]),
    ]
    result = run_loop(
        "What is the dog scared of?", ExtractiveReasoner(), FakeMemory(clips), load_skills(), LoopConfig(max_rounds=3)
    )
    assert result.code == SUCCEEDED and "object" not in result.answer and "don't know" in result.answer, result.answer
