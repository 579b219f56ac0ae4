"""Whose fact (fact_owner): a model fact made from a line its speaker said of themselves is moved to the
speaker's label; facts about the listener, facts no single line explains and uncertain speakers stay."""

from __future__ import annotations

from m3_memory.memorize.fact_owner import owned, source_line
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
