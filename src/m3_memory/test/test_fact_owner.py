"""Whose fact (fact_owner): a model fact made from a line its speaker said of themselves is moved to the
speaker's label, and so is one the model wrote with a name for the speaker's "I"; facts about the listener,
facts no single line explains and uncertain speakers stay. A fact its asker's question to the listener
is all the evidence for says nothing of the asker and is dropped."""

from __future__ import annotations

from m3_memory.memorize.fact_owner import asked_not_said, owned, source_line, speaker_for_name
from m3_memory.memorize.name_mentions import Turns


def _turns(lines: list[tuple[str, str]], group: dict[str, str] | None = None) -> Turns:
    speakers = [s for s, _ in lines]
    return Turns(
        speakers, [[] for _ in lines], [t for _, t in lines], {**{s: s for s in speakers if s}, **(group or {})}
    )


CLIP = _turns(
    [
        ("voice_1", "Do you bake on Mondays?"),
        ("voice_3", "I'll bring the eggs on Wednesday."),  # only heard: a supplier on the phone
        ("voice_2", "Let me look. Your bicycle chain is worn out."),
        ("voice_4", "Then we order more flour tomorrow."),
    ],
    group={"face_3": "person_3", "voice_4": "person_3", "face_1": "person_1", "voice_1": "person_1"},
)


def test_a_first_person_line_gives_its_fact_to_the_speaker():
    assert owned("<face_3> brings eggs on Wednesday.", CLIP) == "<voice_3> brings eggs on Wednesday."
    assert owned("<voice_3> brings eggs on Wednesday.", CLIP) == "<voice_3> brings eggs on Wednesday."


def test_what_is_said_to_someone_or_by_several_stays_where_the_model_put_it():
    assert owned("The bicycle chain of <voice_3> is worn out.", CLIP) == "The bicycle chain of <voice_3> is worn out."
    assert owned("<face_1> orders more flour tomorrow.", CLIP) == "<face_1> orders more flour tomorrow."  # "we"


def test_a_fact_no_single_line_explains_or_about_two_people_stays():
    assert source_line("<face_1> likes Wednesday.", CLIP.texts) is None  # one longer word shared
    assert owned("<face_1> and <voice_2> bring eggs on Wednesday.", CLIP) == (
        "<face_1> and <voice_2> bring eggs on Wednesday."
    )
    same = _turns([("voice_1", "I bring eggs on Wednesday."), ("voice_2", "I bring eggs on Wednesday too.")])
    assert owned("<voice_2> brings eggs on Wednesday.", same) == "<voice_2> brings eggs on Wednesday."


def test_an_uncertain_speaker_moves_nothing_and_one_persons_labels_are_one_person():
    uncertain = _turns([("", "I'll bring the eggs on Wednesday."), ("voice_1", "Good.")])
    assert owned("<face_3> brings eggs on Wednesday.", uncertain) == "<face_3> brings eggs on Wednesday."
    assert (
        owned(
            "<face_3> orders more flour tomorrow.",
            _turns([("voice_4", "I order more flour tomorrow.")], group={"face_3": "person_3", "voice_4": "person_3"}),
        )
        == "<face_3> orders more flour tomorrow."
    )


STAFFROOM = _turns(
    [
        ("voice_2", "John, Kofi, bring the oars out."),  # "Good. Kofi, …" misheard: John is nobody here
        ("voice_1", "I coach the juniors too, so I'm always busy on Sundays."),
        ("voice_3", "My brother Tom lives in Oslo and builds boats."),
        ("voice_2", "Can you clean the boats on Sundays?"),
    ]
)


def test_a_name_the_model_wrote_for_the_speakers_i_becomes_the_speaker():
    moved = speaker_for_name("John is always busy on Sundays.", STAFFROOM, set())
    assert moved == "<voice_1> is always busy on Sundays."
    assert speaker_for_name("Elena's juniors are coached on Sundays.", STAFFROOM, set()) == (
        "<voice_1>'s juniors are coached on Sundays."
    )


def test_a_name_the_line_says_a_known_name_or_a_line_to_someone_stays():
    said = "Tom lives in Oslo and builds boats."
    assert speaker_for_name(said, STAFFROOM, set()) == said  # the line says Tom: its speaker's brother
    other = "Elena lives in Oslo and builds boats."
    assert speaker_for_name(other, STAFFROOM, set()) == other  # a line that names someone may be about them
    known = "Kofi is always busy on Sundays."
    assert speaker_for_name(known, STAFFROOM, {"kofi"}) == known  # the clip knows a Kofi: relabelled, not moved
    asked = "John cleans the boats on Sundays."
    assert speaker_for_name(asked, STAFFROOM, set()) == asked  # "you": the listener's, not the speaker's
    assert speaker_for_name("John and Kofi are always busy on Sundays.", STAFFROOM, set()).startswith("John and")
    assert speaker_for_name("The juniors are always busy on Sundays.", STAFFROOM, set()).startswith("The")


ASKED = _turns(
    [
        ("voice_1", "Are you still working nights at the bakery, Petra?"),
        ("voice_2", "Only on weekends now."),
        ("voice_3", "Could you lend me your ladder tomorrow?"),
        ("voice_4", "Do I still get the staff discount on bread?"),
        ("voice_5", "You left the garden gate open again."),
        ("", "Are you driving the delivery van tomorrow?"),  # no voice: who asked is not known
    ],
    group={"face_1": "person_1", "voice_1": "person_1"},
)


def test_a_question_to_the_listener_says_nothing_of_its_asker():
    assert asked_not_said("<voice_1> works nights at the bakery.", ASKED)
    assert asked_not_said("<face_1> works nights at the bakery.", ASKED)  # the asker's face, one person


def test_facts_about_the_listener_the_askers_own_questions_and_statements_are_kept():
    assert not asked_not_said("<voice_2> works nights at the bakery.", ASKED)  # the one asked
    assert not asked_not_said("<voice_3> borrows a ladder tomorrow.", ASKED)  # "me": what the asker needs
    assert not asked_not_said("<voice_4> gets the staff discount on bread.", ASKED)  # "I": of the asker
    assert not asked_not_said("<voice_5> left the garden gate open again.", ASKED)  # a statement: not this check's
    assert not asked_not_said("<voice_1> asks <voice_2> about working nights at the bakery.", ASKED)  # two people
    assert not asked_not_said("<voice_2> drives the delivery van tomorrow.", ASKED)  # asker unknown
