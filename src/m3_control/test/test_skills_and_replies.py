"""Skill vocabulary validation and the reply grammar parser."""

from __future__ import annotations

import pytest

from m3_control.reasoner import Answer, Search
from m3_control.reply_parser import MalformedReply, parse_reply, strip_reasoning
from m3_control.skills import SkillError, Step, is_question, load_skills, unnamed_objects, validate_plan

SKILLS = load_skills()


def test_vocabulary_has_the_six_skills_with_argument_names():
    assert set(SKILLS) == {"navigate_to", "pick", "place", "hand_over", "say", "look_at"}
    assert SKILLS["pick"].arguments.keys() == {"from"}
    assert SKILLS["say"].arguments.keys() == {"text"}


@pytest.mark.parametrize(
    ("instruction", "step", "error"),
    [
        ("Bring Bob his coffee", {"skill": "fly_to", "target": "moon"}, "unknown skill"),
        ("Bring Bob his coffee", {"skill": "pick", "target": "coffee", "arguments": {"speed": "fast"}}, "no argument"),
        ("Bring Bob his coffee", {"skill": "pick", "target": "coffee", "colour": "red"}, "unknown keys"),
        ("Bring Bob his coffee", {"skill": "hand_over", "target": "the stranger"}, "instruction names"),
        ("Where did Alice put the keys?", {"skill": "hand_over", "target": "Alice"}, "is a question"),
        ("Go to the kitchen", {"skill": "pick", "target": "keys"}, "not requested"),
        ("Go to the kitchen", "navigate_to kitchen", "must be an object"),
    ],
)
def test_bad_steps_are_rejected(instruction, step, error):
    with pytest.raises(SkillError, match=error):
        validate_plan([step], SKILLS, instruction)


def test_good_plans_pass():
    steps = validate_plan(
        [
            {"skill": "navigate_to", "target": "kitchen", "arguments": {}},
            {"skill": "pick", "target": "coffee", "arguments": {"from": "counter"}},
            {"skill": "hand_over", "target": "Bob", "arguments": {"object": "coffee"}},
        ],
        SKILLS,
        "Could you bring Bob his usual coffee?",
    )
    assert steps[2] == Step("hand_over", "Bob", {"object": "coffee"})
    assert validate_plan([], SKILLS, "Where is Bob?") == []
    assert not is_question("Can you bring me the keys?") and is_question("Did Bob drink coffee?")
    assert is_question("At what time does Bob leave?") and is_question("To whom did Alice give the keys?")
    assert not is_question("In the kitchen, bring me the keys") and not is_question("To the kitchen, please")


def test_missing_skills_file_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"skills\.yaml"):
        load_skills(str(tmp_path / "skills.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("skills: []\n")
    with pytest.raises(ValueError, match=r"bad\.yaml"):
        load_skills(str(bad))


def test_parse_replies():
    assert parse_reply("<think>hmm\nAction: [Answer]</think>\nAction: [Search]\nContent: Alice keys") == Search(
        "Alice keys", raw="Action: [Search]\nContent: Alice keys"
    )
    assert strip_reasoning("plan it first</think>Action: [Answer]") == "Action: [Answer]"
    reply = parse_reply('Action: Answer\nContent: In the drawer.\nPlan: []\nEvidence: ["episodic_3"]')
    assert isinstance(reply, Answer) and reply.text == "In the drawer." and reply.evidence_ids == ("episodic_3",)
    multi = parse_reply("**Action:** [Answer]\n**Content:** Bob\nlikes coffee")
    assert multi.text == "Bob\nlikes coffee" and multi.plan == ()
    for bad in (
        "In the drawer.",
        "Action: [Answer]\nContent:   ",
        "Action: [Answer]\nContent: x\nPlan: [oops",
        "<think>",
    ):
        with pytest.raises(MalformedReply):
            parse_reply(bad)


def test_get_and_take_request_a_hand_over_to_the_person_named():
    """'Get Lena a glass of water' asks for a delivery; the receiver must still be named in it."""
    step = {"skill": "hand_over", "target": "Lena", "arguments": {"object": "glass of water"}}
    assert validate_plan([step], SKILLS, "Get Lena a glass of water")[0].target == "Lena"
    assert validate_plan([{**step, "target": "Ravi"}], SKILLS, "Take Ravi his coat")[0].target == "Ravi"
    with pytest.raises(SkillError, match="instruction names"):
        validate_plan([{**step, "target": "the stranger"}], SKILLS, "Get Lena a glass of water")
    with pytest.raises(SkillError, match="not requested"):
        validate_plan([step], SKILLS, "Look at Lena")


def test_a_hand_over_to_someone_else_than_me_is_told_to_use_me():
    """The model, reading 'Kenji left his glasses', hands them to Kenji; the rejection says who 'me' is."""
    step = {"skill": "hand_over", "target": "Kenji", "arguments": {"object": "reading glasses"}}
    with pytest.raises(SkillError, match="use target 'me'"):
        validate_plan([step], SKILLS, "Bring me the reading glasses.")
    assert validate_plan([{**step, "target": "me"}], SKILLS, "Bring me the reading glasses.")[0].target == "me"
    with pytest.raises(SkillError, match="exactly as the instruction names them"):
        validate_plan([step], SKILLS, "Bring Lena the reading glasses.")


def test_an_answer_that_does_not_name_what_the_plan_picks_is_found():
    steps = validate_plan(
        [
            {"skill": "pick", "target": "black coffee with no sugar", "arguments": {"from": "kitchen"}},
            {"skill": "hand_over", "target": "Bob", "arguments": {"object": "black coffee"}},
        ],
        SKILLS,
        "Bring Bob his usual drink.",
    )
    vague = "I will bring Bob his usual drink from the kitchen."
    assert unnamed_objects(vague, steps) == ["black coffee with no sugar"]
    assert unnamed_objects("I will bring Bob a black coffee.", steps) == []
    assert unnamed_objects("Bob's coffee is coming.", steps) == []  # one of the object's words is enough
    assert unnamed_objects("I will go.", [Step("navigate_to", "kitchen")]) == []  # only picked objects count
