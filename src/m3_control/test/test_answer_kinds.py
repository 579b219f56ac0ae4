"""Answer kinds (roles) and replies: a job question finds "<X> is a ..." whatever the job; a question line's
answer is the next speaker's line. Jobs, names and phrasings here are none of the benchmark episodes'."""

from __future__ import annotations

import pytest
from fixtures import FakeMemory

from m3_control.answer_kinds import addressee, answer_kind, asks_back, holds_kind, reply_to
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import LoopConfig, run_loop
from m3_control.memory_client import Memory
from m3_control.skills import load_skills

SKILLS = load_skills()


def said(seq: int, speaker: str, text: str, clip: int = 0) -> Memory:
    return Memory(f"episodic_{seq}", "episodic", f'<{speaker}> says: "{text}"', clip, entity_ids=(speaker,))


def fact(seq: int, text: str, entity: str, clip: int = 0) -> Memory:
    return Memory(f"semantic_{seq}", "semantic", text, clip, entity_ids=(entity,))


GREENHOUSE = [
    (
        0,
        [
            said(1, "voice_1", "Morning, I'm Oskar, I look after the bees on the roof."),
            fact(2, "<voice_1> is called Oskar.", "voice_1"),
            fact(3, "<voice_1> is the beekeeper of the building.", "voice_1"),
            said(4, "voice_2", "Where do we store the spare hive frames?"),
            said(5, "voice_1", "Stacked in the shed behind the compost heap."),
            said(6, "voice_2", "And who signs for the deliveries?"),
            said(7, "voice_2", "I mean the seed parcels."),
            said(8, "voice_3", "Please, I work as a court stenographer, so mornings are hard for me."),
            fact(9, "<voice_3> works as a court stenographer.", "voice_3"),
            said(10, "voice_3", "My scarf is a bit long, sorry."),
            said(11, "voice_1", "Thanks, Wilhelmina."),
            fact(12, "<voice_3> is called Wilhelmina.", "voice_3"),
            said(13, "voice_3", "The tomato seedlings look thirsty."),
            said(14, "voice_1", "Then you can water the seedlings every evening."),
        ],
    ),
    (
        1,
        [
            said(20, "voice_2", "Oskar, you can lock the gate tonight."),
            said(21, "voice_3", "I'm the one who feeds the fish, you know."),
        ],
    ),
]
NAMES = {"voice_1": "Oskar", "voice_3": "Wilhelmina"}


def ask(instruction: str):
    memory = FakeMemory(GREENHOUSE, names=NAMES)
    return run_loop(instruction, ExtractiveReasoner(), memory, SKILLS, LoopConfig())


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What is Oskar's job?", "role"),
        ("What does Wilhelmina do for a living?", "role"),
        ("What does Oskar do?", "role"),
        ("What is the profession of the woman with the scarf?", "role"),
        ("Who looks after the bees?", "person"),
        ("Where do the frames go?", "place"),
        ("What colour is the shed?", ""),
        ("What does the note on the fridge say?", "written"),
        ("What did the sign by the door read?", "written"),
        ("What is written on the whiteboard?", "written"),
        ("What does Oskar say about the notebook?", ""),
        ("At what time does the shop open?", "time"),  # a question may open with a preposition
        ("On which day do the bees swarm?", "time"),
        ("In which room is the shed key?", "place"),
        ("With whom did Oskar go?", "person"),
        ("In the shed, what colour is the door?", ""),
    ],
)
def test_answer_kind(question, kind):
    assert answer_kind(question) == kind


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("Oskar is the beekeeper of the building.", True),
        ("<voice_3> works as a court stenographer.", True),
        ('Pia says: "I\'m a locksmith, call me any time."', True),
        ("Pia works at the harbour office.", True),
        ('Pia says: "My scarf is a bit long, sorry."', False),
        ("Pia is called Pia.", False),
        ("Pia is allergic to cats.", False),
    ],
)
def test_role_statements(text, role):
    assert holds_kind(text, "role", set()) is role


def test_a_job_question_finds_a_job_no_list_names():
    result = ask("What is Oskar's job?")
    assert result.code == "SUCCEEDED", result.error_message
    assert "beekeeper" in result.answer
    result = ask("What does Wilhelmina do for a living?")
    assert "court stenographer" in result.answer


def test_a_question_line_is_answered_by_the_next_speaker():
    result = ask("Where do we store the spare hive frames?")
    assert "shed behind the compost heap" in result.answer
    assert result.evidence_ids[:2] == ["episodic_4", "episodic_5"]


def test_reply_to_needs_another_speaker_next():
    clip = GREENHOUSE[0][1]
    assert asks_back(clip[3]) and reply_to(clip[3], clip) == clip[4]
    assert asks_back(clip[5]) and reply_to(clip[5], clip) is None  # the same speaker goes on
    assert not asks_back(clip[4]) and reply_to(clip[4], clip) is None  # not a question
    other_clip = [said(5, "voice_1", "Stacked in the shed.", clip=1)]
    assert reply_to(clip[3], other_clip) is None  # a line of another clip is no reply
    far = [said(40, "voice_1", "Stacked in the shed.")]
    assert reply_to(clip[3], far) is None  # too far on: lines between are missing from the evidence


def test_a_who_question_on_a_line_saying_you_names_the_person_spoken_to():
    result = ask("Who waters the seedlings?")
    assert "Oskar says" in result.answer and result.answer.endswith("(said to Wilhelmina)")
    result = ask("Who will lock the gate?")
    assert result.answer.endswith("(said to Oskar)")  # called by name
    result = ask("Who feeds the fish?")
    assert "said to" not in result.answer  # "I'm the one who...": the speaker's own


def test_addressee_is_none_without_you_or_another_speaker():
    clip = GREENHOUSE[0][1]
    assert addressee(clip[4], clip) is None  # no "you"
    alone = [said(30, "voice_1", "You can water them later.")]
    assert addressee(alone[0], alone) is None  # nobody else spoke near it


def test_where_it_happened_comes_from_the_region_of_the_robots_pose():
    from m3_control.answer_kinds import where_it_happened
    from m3_memory.graph.records import Place

    line = said(40, "voice_1", "I will paint the fence on Sunday.")
    there = Memory(**{**line.__dict__, "place": Place("map", 1.0, 2.0, 0.0, "garden shed")})
    keys = Memory("episodic_41", "episodic", '<voice_1> says: "The keys are in the blue bowl."', 0,
                  place=Place("map", 1.0, 2.0, 0.0, "garden shed"))  # fmt: skip
    assert where_it_happened("In which room did Oskar talk about the fence?", there, there.text) == (
        "(said in the garden shed)"
    )
    assert where_it_happened("Where was Oskar when he mentioned the fence?", there, there.text) == (
        "(said in the garden shed)"
    )
    assert where_it_happened("Where are the keys?", keys, keys.text) == ""  # its words say where: the answer
    assert where_it_happened("In which room were the keys mentioned?", keys, keys.text) == "(said in the garden shed)"
    assert where_it_happened("In which room did Oskar talk about the fence?", line, line.text) == ""  # no pose
    assert where_it_happened("What will Oskar paint?", there, there.text) == ""  # not a place question
    cup = Memory("episodic_42", "episodic", "<face_2> puts down a cup.", 0, place=there.place)
    assert where_it_happened("Where did Oskar leave the cup?", cup, cup.text) == "(seen in the garden shed)"
    note = Memory("episodic_43", "episodic", "<face_2> is seen.", 0, place=there.place)
    assert where_it_happened("In which room was Oskar?", note, note.text) == "(seen in the garden shed)"


def test_a_room_question_is_answered_with_the_region_it_was_said_in():
    from m3_memory.graph.records import Place

    hall, shed = Place("map", 0.0, 0.0, 0.0, "hall"), Place("map", 5.0, 0.0, 0.0, "garden shed")
    clips = [
        (
            0,
            [
                Memory(
                    "episodic_1",
                    "episodic",
                    '<voice_1> says: "I will paint the fence on Sunday."',
                    0,
                    entity_ids=("voice_1",),
                    place=shed,
                )
            ],
        ),
        (
            1,
            [
                Memory(
                    "episodic_2",
                    "episodic",
                    '<voice_2> says: "The paint for the fence is in the hall."',
                    1,
                    entity_ids=("voice_2",),
                    place=hall,
                )
            ],
        ),
    ]
    clips += [(0, [fact(3, "<voice_1> is called Oskar.", "voice_1"), fact(4, "<voice_2> is called Pia.", "voice_2")])]
    memory = FakeMemory(clips, names={"voice_1": "Oskar", "voice_2": "Pia"})
    result = run_loop("In which room did Oskar say he will paint the fence?", ExtractiveReasoner(), memory, SKILLS,
                      LoopConfig())  # fmt: skip
    assert result.answer.endswith("(said in the garden shed)"), result.answer


@pytest.mark.parametrize(
    ("text", "people", "states"),
    [
        ("Pia is a locksmith.", {"pia"}, True),
        ('Pia says: "I\'m a locksmith, call me any time."', {"pia"}, True),
        ("Pia is the cousin of Oskar.", {"oskar"}, False),  # a relation, and about Pia
        ("Pia is the cousin of Oskar.", {"pia"}, False),  # a relation is no job
        ("Noor is a welder, like Pia.", {"pia"}, False),  # Noor's job
        ("<voice_3> is a surgeon.", set(), True),  # nobody named in the question: anyone's role
    ],
)
def test_a_role_is_the_subjects_own(text, people, states):
    from m3_control.answer_kinds import role_of

    assert role_of(text, people) is states


@pytest.mark.parametrize(
    "question", ["What time is the vet appointment?", "At what time is the vet appointment?", "Which day is the vet?"]
)
def test_a_time_question_is_about_its_subject_not_the_word_time(question):
    """ "time" / "day" only name the kind asked: a note with the vet's time answers (it says neither word)."""
    note = Memory("episodic_30", "episodic", 'A written note or sign says: "Vet Friday 10 am"', 2)
    memory = FakeMemory([(2, [note, said(31, "voice_2", "The roses need pruning.", 2)])], names=NAMES)
    result = run_loop(question, ExtractiveReasoner(), memory, SKILLS, LoopConfig())
    assert "Vet Friday 10 am" in result.answer, result.answer


def test_a_question_about_how_two_people_are_related_asks_for_a_relation():
    from m3_control.answer_kinds import answer_kind, holds_kind

    asked = ("How is Tomas related to Mira?", "What is Ana's relationship with Ben?", "What relation is Li to Bo?")
    for question in asked:
        assert answer_kind(question) == "relation", question
    assert answer_kind("Who is related to Mira?") == "person"
    assert holds_kind("Tomas is the brother of Mira.", "relation", set())
    assert not holds_kind("Tomas builds wooden boats.", "relation", set())
