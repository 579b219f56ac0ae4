"""The rules path that marks an older memory superseded when a newer one moves the same object or
reschedules the same event. DEV pairs were developed against; HELD_OUT pairs were written at the same
time, before the code, in other wordings, and run only to report (a failing one stays as a strict
xfail with its reason, never reworded or tuned to)."""

from __future__ import annotations

import pytest

from m3_memory.graph.fact_changes import Fact, fact_key, facts_of, may_state_fact, supersedes


def replaces(old_text: str, new_text: str) -> bool:
    """Whether any fact of the newer text supersedes any fact of the older one."""
    return any(supersedes(new, old) for new in facts_of(new_text) for old in facts_of(old_text))


# (older text, newer text, newer supersedes older)
DEV = [
    ('<voice_1> says: "I put the keys in the kitchen drawer"', "<person_2> put the keys on the shelf.", True),
    ('<voice_1> says: "I put the keys in the kitchen drawer"', "Alice said the keys are now on the hall table.", True),
    ('<voice_3> says: "the meeting is on Thursday"', '<voice_3> says: "the meeting moved to Friday"', True),
    (
        '<voice_1> says: "our team lunch is on Thursday at noon"',
        '<voice_2> says: "the team lunch was moved to Friday at noon"',
        True,
    ),
    ('<voice_1> says: "I left my glasses on the desk"', '<voice_1> says: "I found my glasses under the sofa"', True),
    ("the remote is on the couch", "<person_1> moved the remote to the tv stand.", True),
    ('<voice_2> says: "I parked the car in the garage"', '<voice_2> says: "the car is now in the driveway"', True),
    (
        '<voice_1> says: "the dentist appointment is at 3pm"',
        '<voice_1> says: "the dentist appointment got changed to 4 pm"',
        True,
    ),
    ('<voice_1> says: "the key is in the bowl"', '<voice_2> says: "I put the keys back in the drawer"', True),
    ("Bob's bike is in the shed", "Bob's bike is now behind the house", True),
    ("the standup is at 9:30", "the standup has been pushed to 10:00", True),
    ("I hung my coat on the hook", "my coat is in the closet", True),
    ("the party is on Saturday", "the party was postponed to next week", True),
    ("I stored the boxes in the attic", "the boxes are under the stairs", True),
    ('<voice_1> says: "my wallet is in my jacket"', '<voice_2> says: "your wallet is on the counter"', True),
    ('<voice_1> says: "dinner with grandma is at 7 pm"', '<voice_1> says: "dinner with grandma is now at 6:30"', True),
    ("I placed the documents on the printer", "<person_3> dropped the documents into the recycling bin.", True),
    ("The vase is on the windowsill.", "Bob said the vase is now next to the TV.", True),
    # must not supersede
    ("the keys are in the drawer", "the phone is on the table", False),
    ('<voice_1> says: "I put the keys in the kitchen drawer"', '<voice_2> says: "where are the keys?"', False),
    ('<voice_1> says: "I put the keys in the kitchen drawer"', "the keys are not in the drawer", False),
    ('<voice_1> says: "I put the keys in the kitchen drawer"', "if you put the keys on the shelf, tell me", False),
    ("I usually keep my keys on the hook", '<voice_1> says: "I keep my keys on the hook"', False),
    ("Bob's keys are on the table", "Anna's keys are in her bag", False),
    ("the meeting is on Friday", "the meeting moved to Friday", False),
    ("the meeting is on Friday", "the dinner is on Saturday", False),
    ("I put the keys in the drawer", "the keys are still in the drawer", False),
    ("my keys are on the shelf", '<voice_1> says: "did you put the keys on the table?"', False),
    ("the meeting is at 3pm", "the meeting is at 3 pm", False),
]

HELD_OUT = [
    pytest.param(
        "<face_4> placed the scissors inside the sewing box.",
        '<voice_5> says: "the scissors are beside the sink now"',
        True,
    ),  # held-out phrasing
    pytest.param(
        '<voice_2> says: "I dropped the charger by the bed"',
        "<person_3> stashed the charger behind the bookcase.",
        True,
    ),  # held-out phrasing
    pytest.param(
        "The dog leash hangs by the front door.",
        "Someone moved the dog leash into the garage.",
        True,
        marks=pytest.mark.xfail(strict=True, reason='intransitive "<thing> hangs by <place>" is no pattern'),
    ),  # held-out phrasing
    pytest.param(
        '<voice_1> says: "the book club meets on Tuesday"',
        '<voice_1> says: "book club got moved to Wednesday"',
        True,
        marks=pytest.mark.xfail(strict=True, reason='"<event> meets on <day>" is no time pattern (only is/will be on)'),
    ),  # held-out phrasing
    pytest.param(
        '<voice_2> says: "the doctor\'s visit is at 10 am"',
        '<voice_2> says: "they rescheduled the doctor\'s visit to 2:15"',
        True,
    ),  # held-out phrasing
    pytest.param(
        "The piano lesson will be on Monday.",
        "The piano lesson has been brought forward to Sunday.",
        True,
    ),  # held-out phrasing
    pytest.param(
        "<person_1> hid the chocolate in the pantry.",
        "The chocolate is kept on the top shelf now.",
        True,
    ),  # held-out phrasing
    pytest.param(
        "the spare batteries are in the toolbox",
        '<voice_9> says: "I just found the spare battery behind the fridge"',
        True,
    ),  # held-out phrasing
    pytest.param(
        '<voice_4> says: "Maria\'s umbrella is by the entrance"',
        '<voice_4> says: "Maria\'s umbrella went to the car"',
        True,
    ),  # held-out phrasing
    pytest.param(
        "the yoga class is at 6 pm",
        "the yoga class is pushed back to 7 pm",
        True,
    ),  # held-out phrasing
    pytest.param(
        '<voice_6> says: "the passports are in the safe"',
        '<voice_6> says: "I moved our passports into the desk drawer"',
        True,
    ),  # held-out phrasing
    pytest.param(
        "The board meeting is on Wednesday at 2 pm.",
        "The board meeting was changed to Thursday at 2 pm.",
        True,
    ),  # held-out phrasing
    pytest.param(
        "I stuck the receipt on the fridge",
        "the receipt is now inside my wallet",
        True,
        marks=pytest.mark.xfail(strict=True, reason='"stuck" is not a placement verb: the older text states nothing'),
    ),  # held-out phrasing
    pytest.param(
        '<voice_8> says: "the tent is stored in the basement"',
        '<voice_8> says: "we put the tent in the car trunk yesterday"',
        True,
    ),  # held-out phrasing
    pytest.param(
        "The parent-teacher conference is tomorrow.",
        "The parent-teacher conference has been postponed until next week.",
        True,
    ),  # held-out phrasing
    pytest.param(
        "the stapler is next to the printer",
        "Carlos said he left the stapler in the conference room.",
        True,
    ),  # held-out phrasing
    # must not supersede
    pytest.param(
        "<face_2> set the laptop on the dining table.",
        '<face_2> says: "the laptop is on the dining table"',
        False,
    ),  # held-out phrasing
    pytest.param(
        "the scissors are in the drawer",
        "the tape is in the drawer",
        False,
    ),  # held-out phrasing
    pytest.param(
        '<voice_1> says: "my glasses are on the nightstand"',
        '<voice_2> says: "have you seen my glasses on the dresser?"',
        False,
    ),  # held-out phrasing
    pytest.param(
        "the charger is under the desk",
        '<voice_3> says: "the charger isn\'t under the desk anymore"',
        False,
    ),  # held-out phrasing
    pytest.param(
        "I keep the spare key under the mat",
        "in case you lose the spare key, put it in the mailbox",
        False,
    ),  # held-out phrasing
    pytest.param(
        '<voice_2> says: "the recital is on Sunday"',
        '<voice_2> says: "the recital is on Sunday, not Saturday"',
        False,
    ),  # held-out phrasing
    pytest.param(
        "Tom's jacket is on the chair",
        "Lena's jacket is in the hallway",
        False,
    ),  # held-out phrasing
    pytest.param(
        "the concert is at 8 pm",
        "the dinner reservation is at 8:30 pm",
        False,
    ),  # held-out phrasing
    pytest.param(
        "the wrench is in the garage",
        "<person_4> wonders whether the wrench is in the shed.",
        False,
    ),  # held-out phrasing
    pytest.param(
        '<voice_1> says: "we always store the blankets in the cedar chest"',
        '<voice_1> says: "the blankets are stored in the cedar chest"',
        False,
    ),  # held-out phrasing
    pytest.param(
        "the vet appointment is on Monday",
        '<voice_5> says: "could we move the vet appointment to Tuesday?"',
        False,
    ),  # held-out phrasing
    pytest.param(
        "the tickets are in the envelope",
        "do not put the tickets on the counter",
        False,
    ),  # held-out phrasing
]


@pytest.mark.parametrize(("old", "new", "expected"), DEV)
def test_dev_pair(old: str, new: str, expected: bool) -> None:
    assert replaces(old, new) is expected


@pytest.mark.parametrize(("old", "new", "expected"), HELD_OUT)
def test_held_out_pair(old: str, new: str, expected: bool) -> None:
    assert replaces(old, new) is expected


def test_a_newer_memory_never_supersedes_itself_the_other_way() -> None:
    """Supersession is about the newer one: swapping the pair of a move still differs in value, so the
    order is the caller's job; the same text against itself never supersedes."""
    for old, new, _ in DEV:
        assert not replaces(new, new)
        assert not replaces(old, old)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<voice_1> says: "I put the keys in the kitchen drawer"', [Fact("keys", "location", "kitchen drawer")]),
        ("<person_2> put the keys on the shelf.", [Fact("keys", "location", "shelf")]),
        ("Alice said the keys are now on the hall table.", [Fact("keys", "location", "hall table")]),
        ('<voice_3> says: "the meeting moved to Friday"', [Fact("meeting", "time", "friday")]),
        ('<voice_1> says: "our team lunch is on Thursday at noon"', [Fact("team lunch", "time", "thursday at noon")]),
        ("the meeting is at 3pm", [Fact("meeting", "time", "3 pm")]),
        ("the standup is at 15:30", [Fact("standup", "time", "15:30")]),
        ("the party is tomorrow", [Fact("party", "time", "tomorrow")]),
        ("Bob's bike is in the shed", [Fact("bob's bike", "location", "shed")]),
        ("My Keys are ON the Shelf", [Fact("keys", "location", "shelf")]),
        ("I found the keys under the sofa", [Fact("keys", "location", "sofa")]),
        ("<person_1> moved the remote to the tv stand.", [Fact("remote", "location", "tv stand")]),
        ("the vase is next to the tv", [Fact("vase", "location", "tv")]),
        ("the receipt is inside my wallet", [Fact("receipt", "location", "wallet")]),  # not "side my wallet"
        (
            "I put the keys in the drawer and the phone is on the table",
            [Fact("keys", "location", "drawer"), Fact("phone", "location", "table")],
        ),
    ],
)
def test_facts_of_a_statement(text: str, expected: list[Fact]) -> None:
    assert facts_of(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "where are the keys?",
        '<voice_2> says: "did you put the keys in the drawer?"',
        "is the meeting on Friday?",
        "the keys are not in the drawer",
        "I didn't put the keys in the drawer",
        "the meeting isn't on Friday",
        "if you put the keys in the drawer",
        "if the meeting moves to Friday, tell me",
        "<face_1> is seen.",
        '<voice_1> says: "hello there, how are you"',
        "put it in the box",
        "",
    ],
)
def test_facts_of_gives_none(text: str) -> None:
    assert facts_of(text) == []


def test_supersedes_compares_normalised_subjects() -> None:
    """Plurals fold and pronoun owners drop; named owners stay; the same value never supersedes."""
    assert supersedes(Fact("keys", "location", "shelf"), Fact("key", "location", "drawer"))
    assert supersedes(Fact("my keys", "location", "shelf"), Fact("his keys", "location", "drawer"))
    assert supersedes(Fact("boxes", "location", "attic"), Fact("box", "location", "stairs"))
    assert not supersedes(Fact("bob's keys", "location", "shelf"), Fact("anna's keys", "location", "drawer"))
    assert not supersedes(Fact("keys", "location", "shelf"), Fact("keys", "location", "the shelf"))
    assert not supersedes(Fact("meeting", "time", "3pm"), Fact("meeting", "time", "3 pm"))
    assert not supersedes(Fact("meeting", "time", "friday"), Fact("meeting", "location", "room 4"))
    assert not supersedes(Fact("keys", "location", "shelf"), Fact("phone", "location", "drawer"))


def test_fact_key_groups_facts_that_can_supersede() -> None:
    """The graph indexes facts by this key, so every pair that supersedes must share it."""
    assert fact_key(Fact("my keys", "location", "shelf")) == fact_key(Fact("key", "location", "drawer"))
    assert fact_key(Fact("bob's keys", "location", "shelf")) != fact_key(Fact("anna's keys", "location", "shelf"))
    assert fact_key(Fact("meeting", "time", "friday")) != fact_key(Fact("meeting", "location", "room 4"))
    for old, new, expected in DEV:
        pairs = [(n, o) for n in facts_of(new) for o in facts_of(old) if supersedes(n, o)]
        assert all(fact_key(n) == fact_key(o) for n, o in pairs)
        assert bool(pairs) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The umbrella hangs by the back door.", True),  # a place the rules read nothing in
        ('<voice_2> says: "the choir rehearses on Wednesday evening"', True),  # a time
        ('<voice_1> says: "my scooter is chained in the courtyard"', True),
        ('<voice_1> says: "the dentist is at 4 pm"', True),
        ('<voice_1> says: "where did you hang the umbrella?"', False),  # a question states nothing
        ('<voice_1> says: "the umbrella is not by the door"', False),  # nor a negation
        ('<voice_1> says: "if it rains, leave it by the door"', False),  # nor a hypothetical
        ('<voice_2> says: "Thanks, it is nice to be here."', False),  # no place, no time
        ("<face_1> is seen.", False),
    ],
)
def test_a_statement_the_rules_miss_may_still_state_a_fact(text: str, expected: bool) -> None:
    assert may_state_fact(text) is expected
