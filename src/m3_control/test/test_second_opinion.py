"""A model's "I don't know" is replaced by the rules' answer when they find one, and nothing else is."""

from __future__ import annotations

import pytest

from m3_control.loop import SUCCEEDED, LoopResult
from m3_control.reasoner import MODEL_ERROR
from m3_control.second_opinion import abstains, ask_rules_when_unsure


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
    out = ask_rules_when_unsure(model, lambda: _rules("Ines keeps the aprons in the cupboard."))
    assert out.answer == "Ines keeps the aprons in the cupboard." and out.answered_by == "extractive"
    assert out.rounds_used == 5 and out.timings_ms == [5.0, 1.0, 2.0]
    assert out.transcript[0] == {"x": 1} and "rules answered" in out.transcript[-1]["content"]


def test_the_model_answer_stands_otherwise() -> None:
    unsure = LoopResult(SUCCEEDED, answer="I don't know.", rounds_used=3)
    assert ask_rules_when_unsure(unsure, lambda: _rules("I don't know: my memory holds nothing.")) is unsure
    assert ask_rules_when_unsure(unsure, lambda: _rules("", code=MODEL_ERROR)) is unsure
    guess = LoopResult(SUCCEEDED, answer="Marek fixed it.", rounds_used=1)
    assert ask_rules_when_unsure(guess, _never) is guess  # a wrong guess is not second-guessed
    failed = LoopResult(MODEL_ERROR, answer="", rounds_used=1)
    assert ask_rules_when_unsure(failed, _never) is failed
    planned = LoopResult(SUCCEEDED, answer="I don't know where it is; I will look.", plan=["step"], rounds_used=1)
    assert ask_rules_when_unsure(planned, _never) is planned
