"""What is in view now (view.py): which questions ask about the present, how words meet detector classes,
and what the answer says when perception is silent or its view is stale."""

from __future__ import annotations

import pytest

from m3_control.view import Sighting, ViewQuestion, ViewState, answer_now, matches, view_question
from m3_memory.search.as_of import NS_PER_S as NS


@pytest.mark.parametrize(
    ("instruction", "expected"),
    [
        ("Can you see a cup?", ViewQuestion("thing", "cup")),
        ("Do you see the umbrella right now?", ViewQuestion("thing", "umbrella")),
        ("can you still see my backpack", ViewQuestion("thing", "backpack")),
        ("Is the cat in view?", ViewQuestion("thing", "cat")),
        ("Is there a laptop in front of you?", ViewQuestion("thing", "laptop")),
        ("Are there any chairs here?", ViewQuestion("thing", "chairs")),
        ("Robot, is there a bottle visible now?", ViewQuestion("thing", "bottle")),
        ("What do you see?", ViewQuestion("all")),
        ("What's in front of you right now?", ViewQuestion("all")),
        ("Is there anything in view?", ViewQuestion("all")),
        ("Can you see anyone?", ViewQuestion("people")),
        ("Who do you see?", ViewQuestion("people")),
        ("Can you see the note?", ViewQuestion("thing", "note")),
        ("How many people can you see?", ViewQuestion("count", "people")),
        ("How many people do you see right now?", ViewQuestion("count", "people")),
        ("how many cups are there in front of you", ViewQuestion("count", "cups")),
        ("How many chairs are in view?", ViewQuestion("count", "chairs")),
    ],
)
def test_questions_about_now(instruction, expected):
    assert view_question(instruction) == expected


@pytest.mark.parametrize(
    "instruction",
    [
        "Did you see a cup?",  # the past: memory
        "Have you seen the keys?",
        "Where did you see the cat?",
        "Where is the cup?",
        "What did Bob hold?",
        "Is Bob here?",  # a person by name: the detector sees people, not who they are
        "Can you see Alice?",
        "Bring me the cup from the kitchen.",
        "What does the note say?",  # what it said: the memory of the reading
        "How many cups are there in the kitchen?",  # a place in memory, not the view
        "How many people did you see?",
        "How many Smiths can you see?",  # a name
    ],
)
def test_other_questions_go_to_memory(instruction):
    assert view_question(instruction) is None


def test_words_meet_detector_classes():
    assert matches("cups", "cup") and matches("cell phones", "cell phone") and matches("cellphone", "cell phone")
    assert matches("phone", "cell phone") and matches("mug", "cup") and matches("fridge", "refrigerator")
    assert matches("table", "diningtable") and matches("plant", "pottedplant") and matches("tv", "tvmonitor")
    assert matches("glass", "wine glass") and matches("mug", "coffee mug")  # a user's own class, by its last word
    assert matches("people", "person") and matches("boxes", "box") and matches("benches", "bench")
    assert not matches("dog", "hot dog") and not matches("bear", "teddy bear")
    assert not matches("cup", "cupboard") and not matches("keys", "keyboard") and not matches("", "cup")


def sighting(track: str, label: str, confidence: float, seconds: float) -> Sighting:
    return Sighting(track, label, confidence, int(seconds * NS))


def test_answers_from_the_newest_images():
    view = ViewState()
    first = [
        sighting("object_1", "cup", 0.8, 10),
        sighting("object_4", "cup", 0.5, 10),
        sighting("object_2", "person", 0.9, 10),
    ]
    view.objects(10 * NS, first, received=100.0)
    # half a second later the detector misses one cup, and the tracker gives the person a new id
    view.objects(
        10 * NS + NS // 2,
        [sighting("object_1", "cup", 0.7, 10.5), sighting("object_5", "person", 0.9, 10.5)],
        received=100.5,
    )
    assert answer_now(ViewQuestion("thing", "mug"), view, now=101.0) == "Yes: I see 2 cups now."
    assert answer_now(ViewQuestion("all"), view, now=101.0) == "I see a person and 2 cups."  # one person, not two
    assert answer_now(ViewQuestion("people"), view, now=101.0) == "Yes: I see a person now."
    assert answer_now(ViewQuestion("count", "people"), view, now=101.0) == "I see a person now."
    assert answer_now(ViewQuestion("count", "mugs"), view, now=101.0) == "I see 2 cups now."
    assert answer_now(ViewQuestion("count", "dogs"), view, now=101.0) == "I see no dogs now."
    no_dog = answer_now(ViewQuestion("thing", "dog"), view, now=101.0)
    assert no_dog == "No: I do not see any dog now. I see a person and 2 cups."
    # 1.5 s on (stream time) only one cup is seen: what the earlier images showed is out of the window
    view.objects(12 * NS, [sighting("object_1", "cup", 0.6, 12)], received=102.0)
    assert answer_now(ViewQuestion("people"), view, now=102.1) == "No: I see nobody now."
    assert answer_now(ViewQuestion("thing", "cup"), view, now=102.1) == "Yes: I see a cup now."


def test_silent_or_stale_perception_is_not_a_no():
    view = ViewState(max_age_s=3.0)
    silent = answer_now(ViewQuestion("thing", "cup"), view, now=5.0)
    assert silent.startswith("I cannot tell what is in view now: no objects have come from perception yet")
    view.objects(NS, [sighting("object_1", "cup", 0.8, 1)], received=10.0)
    stale = answer_now(ViewQuestion("thing", "cup"), view, now=20.0)
    assert stale == (
        "I cannot tell what is in view now: nothing has come from perception's objects for 10 s "
        "(has the camera or perception stopped?)."
    )
    text = answer_now(ViewQuestion("thing", "note"), view, now=10.5)
    assert text.startswith("I cannot tell whether there is written text in view now: no texts have come")


def test_written_text_in_view_and_a_new_recording():
    view = ViewState(text_window_s=10.0)
    view.objects(20 * NS, [], received=50.0)
    sign = [
        Sighting("text_2", "off your shoes", 0.99, 20 * NS, x=100, y=240),  # the lower line, read more surely
        Sighting("text_1", "Please take", 0.95, 20 * NS, x=110, y=200),
    ]
    view.texts(20 * NS, sign, received=50.0)
    assert (
        answer_now(ViewQuestion("thing", "sign"), view, now=51.0) == 'Yes: I can read "Please take"; "off your shoes".'
    )
    everything = answer_now(ViewQuestion("all"), view, now=51.0)
    assert everything == 'I see nothing I can name. I can read "Please take"; "off your shoes".'
    view.texts(40 * NS, [], received=60.0)  # read nothing for 20 s of stream time: the note is gone
    assert answer_now(ViewQuestion("thing", "note"), view, now=60.5) == "No: I can read no note now."
    # a recording played again from its start: the stream goes back in time, nothing older stays
    view.objects(50 * NS, [sighting("object_9", "cat", 0.9, 50)], received=61.0)
    view.objects(1 * NS, [sighting("object_1", "cup", 0.9, 1)], received=62.0)
    assert answer_now(ViewQuestion("all"), view, now=62.5) == "I see a cup."
