"""A model's "I don't know" is replaced by the rules' answer when they find one, and so is a where / when /
how-many or plain "what" answer that a memory answering the whole question contradicts; nothing else is."""

from __future__ import annotations

import pytest

from m3_control.loop import SUCCEEDED, LoopResult
from m3_control.memory_client import Memory
from m3_control.reasoner import MODEL_ERROR, LoopState
from m3_control.second_opinion import abstains, ask_rules_when_unsure, unanswered

Q = "Who keeps the aprons, and where?"


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I don't know: nothing in my memory says that.",
        "I do not know where Priya keeps her passport.",
        "i dont know",
        "I cannot tell from my memory who fixed the boiler.",
        "I'm not sure.",
        "I am not sure which room that was in.",
        "Unknown.",
        "There is no information about the ferry timetable.",
        "No mention of a dentist appointment.",
        "My memory holds nothing about Olek's job.",
        "Nothing in my memory says when the plumber came.",
    ],
)
def test_abstentions_in_many_phrasings(answer: str) -> None:
    assert abstains(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Nobody knows the garden better than Ruth.",
        "No, she did not.",
        "Unknown Pleasures is the record on the shelf.",
        "The key is in the drawer; I don't know who moved it.",
        "Hamid said he doesn't know the way.",
        "In the kitchen.",
    ],
)
def test_answers_are_not_abstentions(answer: str) -> None:
    assert not abstains(answer)


def _rules(answer: str, code: str = SUCCEEDED) -> LoopResult:
    return LoopResult(code, answer=answer, rounds_used=2, timings_ms=[1.0, 2.0], transcript=[])


def _never() -> LoopResult:
    raise AssertionError("the rules were asked")


def test_the_rules_answer_when_the_model_did_not_know() -> None:
    model = LoopResult(SUCCEEDED, answer="I don't know.", rounds_used=3, timings_ms=[5.0], transcript=[{"x": 1}])
    out = ask_rules_when_unsure(Q, model, lambda: _rules("Ines keeps the aprons in the cupboard."))
    assert out.answer == "Ines keeps the aprons in the cupboard." and out.answered_by == "extractive"
    assert out.rounds_used == 5 and out.timings_ms == [5.0, 1.0, 2.0]
    assert out.transcript[0] == {"x": 1} and "rules answered" in out.transcript[-1]["content"]


def test_the_model_answer_stands_otherwise() -> None:
    unsure = LoopResult(SUCCEEDED, answer="I don't know.", rounds_used=3)
    assert ask_rules_when_unsure(Q, unsure, lambda: _rules("I don't know: my memory holds nothing.")) is unsure
    assert ask_rules_when_unsure(Q, unsure, lambda: _rules("", code=MODEL_ERROR)) is unsure
    guess = LoopResult(SUCCEEDED, answer="Marek fixed it.", rounds_used=1)
    assert ask_rules_when_unsure(Q, guess, _never) is guess  # a wrong guess is not second-guessed
    failed = LoopResult(MODEL_ERROR, answer="", rounds_used=1)
    assert ask_rules_when_unsure(Q, failed, _never) is failed
    planned = LoopResult(SUCCEEDED, answer="I don't know where it is; I will look.", plan=["step"], rounds_used=1)
    assert ask_rules_when_unsure(Q, planned, _never) is planned


@pytest.mark.parametrize(
    ("question", "answer", "open_"),
    [
        ("Where were you when Dara said she had a cat?", "Dara said she has a cat named Pip.", True),
        ("Where were you when Dara said she had a cat?", "In the garden.", False),
        ("In which room did Olek talk about the boiler?", "Olek talked about the boiler.", True),
        ("When is the piano lesson?", "Hamid has a piano lesson.", True),
        ("When is the piano lesson?", "On Thursday at 4 pm.", False),
        ("How many chairs are in the shed?", "There are chairs in the shed.", True),
        ("How many chairs are in the shed?", "Six.", False),
        ("Who fixed the boiler?", "The plumber did.", False),  # a person is not a crisp kind: it stands
    ],
)
def test_where_when_how_many_answers_without_their_kind_are_open(question: str, answer: str, open_: bool) -> None:
    assert unanswered(question, answer) is open_


@pytest.mark.parametrize(
    ("question", "answer", "open_"),
    [
        ("What is the trade of the man with the bad back?", "The man with the bad back is a man.", True),
        ("What does Ilse's son collect?", "Ilse's son collects.", True),
        ("What does Ilse's son collect?", "Stamps.", False),
        ("Did Ilse feed the goats?", "Yes.", False),
        ("Did Ilse feed the goats?", "No, Ilse did not feed the goats.", False),
        ("Which day does Ilse bake?", "Ilse bakes on Sunday.", False),
    ],
)
def test_an_answer_that_only_repeats_the_question_is_open(question: str, answer: str, open_: bool) -> None:
    assert unanswered(question, answer) is open_


def test_a_where_answer_without_a_place_gets_the_rules_place() -> None:
    question = "Where were you when Dara said she had a cat?"
    model = LoopResult(SUCCEEDED, answer="Dara said she has a cat named Pip.", rounds_used=2)
    rules = ask_rules_when_unsure(question, model, lambda: _rules('Dara says: "I have a cat." (said in the hall)'))
    assert rules.answered_by == "extractive" and "in the hall" in rules.answer
    no_place = ask_rules_when_unsure(question, model, lambda: _rules('Dara says: "I have a cat."'))
    assert no_place is model  # the rules' answer leaves it open too: the model's stands


def _rules_over(question: str, *texts: str) -> LoopResult:
    """The rules' outcome with the memories they retrieved (the loop's last state)."""
    evidence = [Memory(node_id=f"episodic_{i}", kind="episodic", text=t, clip_index=1) for i, t in enumerate(texts)]
    state = LoopState(instruction=question, round=2, max_rounds=5, evidence=evidence)
    return LoopResult(SUCCEEDED, answer=texts[0], rounds_used=2, state=state)


@pytest.mark.parametrize(
    ("question", "memory", "mixed", "agreeing", "right"),
    [
        (  # where / when / how-many: a small model mixes in another fact of the same clip
            "When is the fire drill?",
            ('<voice_1> says: "Good morning staff. The fire drill is at 11 today."', "The match is on Tuesday."),
            "The fire drill is on Tuesday.", "It is at 11 today.", "at 11 today",
        ),
        (  # a plain "what": the neighbouring line's thing; "bought" still meets the question's "buy"
            "What did Ahmed buy at the market?",
            ('Ahmed says: "I bought two kilos of plums at the market."', 'Ahmed says: "I also got bread."'),
            "Bread.", "Plums.", "plums",
        ),
        (  # "left" meets "leave"
            "What did Greta leave in the van?",
            ('Greta says: "I left my toolbox in the van."', 'Greta says: "My gloves are at home."'),
            "Her gloves.", None, "toolbox",
        ),
    ],
)  # fmt: skip
def test_certain_rules_overrule_a_model_that_says_otherwise(question, memory, mixed, agreeing, right) -> None:
    outcome = LoopResult(SUCCEEDED, answer=mixed, rounds_used=3)
    out = ask_rules_when_unsure(question, outcome, lambda: _rules_over(question, *memory))
    assert out.answered_by == "extractive" and right in out.answer
    if agreeing is not None:
        agreed = LoopResult(SUCCEEDED, answer=agreeing, rounds_used=3)
        assert ask_rules_when_unsure(question, agreed, lambda: _rules_over(question, *memory)) is agreed


def test_the_model_stands_on_role_and_relation_questions() -> None:
    """A role's or a relation's words are met by any line of that person: the rules are never certain there."""
    model = LoopResult(SUCCEEDED, answer="She teaches maths at the primary school.", rounds_used=3)
    for question in ("What is Leila's job?", "How is Ruth related to Sam?"):
        assert ask_rules_when_unsure(question, model, _never) is model


def test_the_model_stands_where_the_rules_are_not_certain() -> None:
    question = "Where are the coffee tokens kept?"
    model = LoopResult(SUCCEEDED, answer="In the kitchen.", rounds_used=3)
    partial = ('<voice_1> says: "The coffee machine only takes tokens, in the blue tin."',)  # no "kept"
    assert ask_rules_when_unsure(question, model, lambda: _rules_over(question, *partial)) is model
    asked = ('<voice_2> says: "Where are the coffee tokens kept?"',)  # every word, but no place: a question
    assert ask_rules_when_unsure(question, model, lambda: _rules_over(question, *asked)) is model
    who = "Who keeps the coffee tokens?"  # not a where / when / how-many question: never second-guessed
    guess = LoopResult(SUCCEEDED, answer="Marek does.", rounds_used=1)
    assert ask_rules_when_unsure(who, guess, _never) is guess


def _named(answer: str, names: dict[str, str]) -> LoopResult:
    """A model's outcome whose loop learnt these names (entity id -> name)."""
    state = LoopState(instruction="", round=2, max_rounds=5, names=names)
    return LoopResult(SUCCEEDED, answer=answer, rounds_used=2, state=state)


def test_a_bare_name_where_no_person_is_asked_gets_the_rules_answer() -> None:
    question = "What does the person who plays the cello collect?"
    names = {"voice_2": "Ilse", "face_1": "Tobias"}
    model = _named("Ilse.", names)
    out = ask_rules_when_unsure(question, model, lambda: _rules('Ilse says: "I collect old maps."'))
    assert out.answered_by == "extractive" and "old maps" in out.answer
    checked = _named("Tobias checked first.", names)  # a name and the question's own words
    out = ask_rules_when_unsure("What did the nurse check first?", checked, lambda: _rules("The blood pressure."))
    assert out.answered_by == "extractive"


def test_a_name_answers_a_question_about_a_person() -> None:
    names = {"voice_2": "Ilse"}
    for question in (
        "Who plays the cello?", "Which person collects maps?", "Which guest came late?", "What is the cellist called?",
        "Tell me who plays the cello.", "Name the cellist.",
    ):  # fmt: skip
        model = _named("Ilse.", names)
        assert ask_rules_when_unsure(question, model, _never) is model
    # not a name memory holds: a guess of the wrong kind is not second-guessed, unless the rules are certain
    question = "What does the cellist collect?"
    partial = lambda: _rules_over(question, 'Ilse says: "I play the cello."')  # noqa: E731  ("collect" missing)
    unknown = _named("Marek.", names)
    assert ask_rules_when_unsure(question, unknown, partial) is unknown
    more = _named("Ilse collects old maps.", names)
    assert ask_rules_when_unsure(question, more, partial) is more
