"""A person's name from the votes of its mentions: spellings of one name vote together."""

from m3_memory.graph.people import PeopleMixin, spelling_groups
from m3_memory.graph.records import KIND_PERSON, EntityRecord


def _person(votes: dict[str, int], name: str = "") -> EntityRecord:
    return EntityRecord("person_1", 1, KIND_PERSON, name=name, name_votes=votes)


def test_spellings_one_edit_apart_are_one_name_short_names_are_not() -> None:
    assert spelling_groups({"Sophie": 1, "Sophia": 1, "Yosuf": 1}) == [["Sophia", "Sophie"], ["Yosuf"]]
    assert spelling_groups({"Tom": 1, "Tim": 1}) == [["Tim"], ["Tom"]]  # different names, not spellings
    assert spelling_groups({"Katarina": 1, "Katerina": 1, "Caterina": 1}) == [["Caterina", "Katarina", "Katerina"]]


def test_two_spellings_outvote_one_other_name() -> None:
    # the first vote (a name heard while two people shared a voice) came first and was the name till now
    assert PeopleMixin._winning_name(_person({"Yosuf": 1, "Sophie": 1, "Sophia": 1}, "Yosuf")) == "Sophia"


def test_a_tie_keeps_the_current_name_and_the_most_voted_spelling_names_the_group() -> None:
    assert PeopleMixin._winning_name(_person({"Mateo": 1, "Farid": 1}, "Farid")) == "Farid"
    assert PeopleMixin._winning_name(_person({"Matteo": 1, "Mateo": 2, "Farid": 2})) == "Mateo"


def test_within_one_name_the_most_voted_spelling_wins_over_the_current_one() -> None:
    # "Tova" heard once in a self-introduction, "Tove" twice from the others: one name, spelt "Tove"
    assert PeopleMixin._winning_name(_person({"Tova": 1, "Tove": 2}, "Tova")) == "Tove"
