"""The judge (model and normalised-match modes) and back-end selection."""

from __future__ import annotations

import json

import pytest
from fixtures import ChatServer

from m3_control import judge
from m3_control.backends import make_reasoner
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.openai_reasoner import OpenAIReasoner
from m3_control.skills import load_skills


def lines(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_normalised_match_is_labelled(capsys):
    assert judge.main(["--truth", "three", "--answer", "I saw 3 cups."]) == 0
    item, summary = lines(capsys)
    assert item["correct"] is True and summary["method"] == "normalised-match"
    assert judge.match("the drawer", "In the hallway drawer.")
    assert not judge.match("the drawer", "It is on the shelf.")
    assert not judge.match("4", "There were 14 cups.")
    assert not judge.match("Alice", "Bob put them there.")
    assert judge.match("blue notebook", "in the blue note book, on the shelf.")  # a compound written apart
    assert judge.match("living room", "In the livingroom.")
    assert not judge.match("ten", "There are still tent boxes.")  # a word's prefix is not the word
    assert not judge.match("notebook", "a note about a book")


def test_a_plural_answers_its_singular_and_back():
    assert judge.match("pie", "Strawberries are for pies.")
    assert judge.match("strawberry pies", "strawberry pie")
    assert judge.match("box", "in the boxes under the bed")
    assert judge.match("berries", "a berry tart")
    assert judge.match("glasses", "her glass")  # both sides folded the same way
    assert not judge.match("pie", "a piece of cake")  # still whole words
    assert not judge.match("cats", "the dog")


def test_the_pronoun_one_in_a_truth_is_the_noun_an_answer_names():
    assert judge.match("the one in the kitchen", "The printer in the kitchen should be used.")
    assert judge.match("the ones on the top shelf", "The blue mugs on the top shelf.")
    assert judge.match("the one in the kitchen", "Use the one in the kitchen.")
    assert not judge.match("the one in the kitchen", "The printer on the third floor.")
    assert judge.match("the one", "The one.")  # the pronoun alone is the truth
    assert not judge.match("the ones by the door", "The keys are in the drawer.")


def test_number_words_match_the_digits_speech_recognition_writes():
    assert judge.match("twenty five euros", "A new chain cost 25 euros.")
    assert judge.match("forty", "Order 40 inner tubes.")
    assert judge.match("40", "Order forty.")  # a number word that ends a sentence
    assert judge.match("one hundred and five", "It is 105 km away.")
    assert judge.match("25", "twenty-five of them")
    assert judge.match("five thirty", "The ovens go on at 5:30.")  # a unit before tens: a time, two numbers
    assert not judge.match("five thirty", "It costs 35 euros.")
    assert not judge.match("twenty five euros", "It costs 20 euros.")
    assert not judge.match("forty", "There were 14 cups.")


def test_ordinals_match_the_digits_speech_recognition_writes():
    assert judge.match("the twelfth", "The birthday is on the 12th.")
    assert judge.match("12th", "on the twelfth of May")
    assert judge.match("twenty first", "It is the 21st today.")
    assert judge.match("third floor", "On the 3rd floor.")
    assert judge.match("fourth of June", "the 4th of June")
    assert not judge.match("the twelfth", "The birthday is on the 11th.")
    assert not judge.match("twenty first", "It is the 20th today.")


def test_british_and_american_spellings_are_one_word():
    assert judge.match("the fish restaurant by the harbour", "At the fish restaurant by the harbor at 8.")
    assert judge.match("red colour", "a red color")
    assert judge.match("her favourite mug", "Her favorite mug.")
    assert judge.match("neighbours", "the neighbors")
    assert judge.match("flour", "a bag of flour")  # a short word is left as it is
    assert not judge.match("harbour", "by the river")
    assert not judge.match("four", "it is for you")  # "four" is a number, never folded to "for"


def test_model_judge_over_local_server(tmp_path, capsys):
    data = tmp_path / "items.jsonl"
    data.write_text(
        json.dumps({"question": "Where are the keys?", "ground_truth": "drawer", "answer": "In the drawer."})
        + "\n"
        + json.dumps({"question": "Who took them?", "ground_truth": "Alice", "answer": "Bob did."})
        + "\n"
    )
    with ChatServer(["<think>It says drawer.</think>Yes", "No."]) as server:
        code = judge.main(["--file", str(data), "--endpoint", server.endpoint, "--model", "judge-test"])
    assert code == 0
    first, second, summary = lines(capsys)
    assert (first["correct"], second["correct"]) == (True, False)
    assert summary == {"method": "model:judge-test", "items": 2, "correct": 1, "accuracy": 0.5}
    prompt = server.requests[0]["messages"][0]["content"]
    assert "Ground Truth Answer: drawer" in prompt and server.requests[0]["temperature"] == 0.0

    with ChatServer(["Maybe."] * 3) as server:
        assert judge.main(["--truth", "x", "--answer", "y", "--endpoint", server.endpoint]) == 1
    assert "neither Yes nor No" in capsys.readouterr().err


def test_judge_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"answer": "x"}\nnot json\n')
    assert judge.main(["--file", str(bad)]) == 2
    assert "line 2 is not JSON" in capsys.readouterr().err
    assert judge.main([]) == 2


def test_backend_selection():
    skills = load_skills()
    assert isinstance(make_reasoner("extractive", skills)[0], ExtractiveReasoner)
    reasoner, prompt = make_reasoner("openai", skills)
    assert isinstance(reasoner, OpenAIReasoner) and "look_at" in prompt
    with pytest.raises(ValueError, match="unknown backend"):
        make_reasoner("gpt", skills)
    with pytest.raises(FileNotFoundError, match="no_such_prompt"):
        make_reasoner("openai", skills, system_prompt_file="/tmp/no_such_prompt.txt")


def test_vllm_backend_names_the_missing_package():
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="'vllm'"):
            make_reasoner("vllm", load_skills(), vllm_model="/models/M3-Agent-Control")
    else:
        pytest.skip("vllm is installed: the guard does not apply")


def test_a_name_in_another_listed_spelling_is_that_name():
    """A household's truth files list a name's spellings (Sofia: Sophia); memory answers in the one it
    heard, and the normalised match takes every listed one, whole words only, any case."""
    base, _ = judge.make_judge("", "", 0.0, "")
    spellings = [["Sofia", "Sophia"], ["Yusuf", "Yousef", "Yusef"], ["Mateo"]]
    judged = judge.with_spellings(base, spellings)
    assert not base("Who owns the bakery?", "Sofia", "Sophia owns this bakery.")
    assert judged("Who owns the bakery?", "Sofia", "Sophia owns this bakery.")
    assert judged("Who?", "Sofia and Yusuf", "sophia and yousef")
    assert not judged("Who owns the bakery?", "Sofia", "Sophie owns this bakery.")  # not a listed spelling
    assert not judged("Who owns the bakery?", "Sofia", "Yusuf owns it.")  # another person
    assert not judged("Who bakes?", "Yusuf", "Yusufa bakes.")  # a word's prefix is not the name
    assert judge.truth_variants("the Sofia bakery", [["Sofia", "Sophia"]]) == ["the Sofia bakery", "the Sophia bakery"]
    assert judge.truth_variants("on the hook", spellings) == ["on the hook"]
    assert judge.with_spellings(base, []) is base
