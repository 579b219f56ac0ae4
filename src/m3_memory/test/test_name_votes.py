"""A person's name from the votes of its mentions: spellings of one name vote together."""

from m3_memory.graph.name_spellings import same_name, spelling_groups, spelling_in
from m3_memory.graph.people import PeopleMixin
from m3_memory.graph.records import KIND_PERSON, EntityRecord


def _person(votes: dict[str, int], name: str = "") -> EntityRecord:
    return EntityRecord("person_1", 1, KIND_PERSON, name=name, name_votes=votes)


def test_spellings_one_edit_apart_are_one_name_short_names_are_not() -> None:
    assert spelling_groups({"Sophie": 1, "Sophia": 1, "Yosuf": 1}) == [["Sophia", "Sophie"], ["Yosuf"]]
    assert spelling_groups({"Tom": 1, "Tim": 1}) == [["Tim"], ["Tom"]]  # different names, not spellings
    assert spelling_groups({"Katarina": 1, "Katerina": 1, "Caterina": 1}) == [["Caterina", "Katarina", "Katerina"]]


# Pairs from common name lists, none of them an episode's: spellings that sound alike, and names that differ.
SPELLINGS = [
    ("Sofia", "Sophie"), ("Catherine", "Kathryn"), ("Stephen", "Steven"), ("Mohammed", "Muhammad"),
    ("Youssef", "Yusuf"), ("Ingrid", "Ingred"), ("Matteo", "Mateo"), ("Philippa", "Filipa"),
]  # fmt: skip
DIFFERENT = [
    ("Tom", "Tim"), ("Dan", "Don"), ("Anya", "Daniel"), ("Tomasz", "Ingrid"), ("Mark", "Mike"), ("Emma", "Emily"),
    ("Ines", "Agnes"), ("Kenji", "Ken"), ("Omar", "Amara"), ("Mateo", "Marek"), ("Bob", "Rob"),
]  # fmt: skip


def test_spellings_that_sound_alike_are_one_name_and_different_names_are_not() -> None:
    assert [p for p in SPELLINGS if not same_name(*p)] == []
    assert [p for p in DIFFERENT if same_name(*p)] == []
    assert not same_name("", "") and same_name("ALICE", "alice")
    assert same_name("Anya", "Anna")  # the cost of one edit apart: two names, taken for one spelling


def test_a_word_names_the_one_person_it_is_a_spelling_of() -> None:
    assert spelling_in("Yusuf", ["Yosuf", "Sophie"]) == "Yosuf"
    assert spelling_in("Sophie", ["Yosuf", "Sophie"]) == ""  # itself a name: that one
    assert spelling_in("Maria", ["Mario", "Marya"]) == ""  # two candidates: none
    assert spelling_in("Kitchen", ["Yosuf", "Sophie"]) == ""


def test_two_spellings_outvote_one_other_name() -> None:
    # the first vote (a name heard while two people shared a voice) came first and was the name till now
    assert PeopleMixin._winning_name(_person({"Yosuf": 1, "Sophie": 1, "Sophia": 1}, "Yosuf")) == "Sophia"


def test_a_tie_keeps_the_current_name_and_the_most_voted_spelling_names_the_group() -> None:
    assert PeopleMixin._winning_name(_person({"Mateo": 1, "Farid": 1}, "Farid")) == "Farid"
    assert PeopleMixin._winning_name(_person({"Matteo": 1, "Mateo": 2, "Farid": 2})) == "Mateo"


def test_within_one_name_the_most_voted_spelling_wins_over_the_current_one() -> None:
    # "Tova" heard once in a self-introduction, "Tove" twice from the others: one name, spelt "Tove"
    assert PeopleMixin._winning_name(_person({"Tova": 1, "Tove": 2}, "Tova")) == "Tove"


def test_a_vote_weighs_what_its_line_was_heard_with() -> None:
    """Two names said once each: the one heard more surely wins (before: the first heard), whatever the order."""
    from m3_memory.graph.people import MIN_VOTE, heard_weight
    from m3_memory.graph.records import VoiceEvidence

    lines = [
        VoiceEvidence("voice_1", 0, 1, "Kenji, this is Amolum.", 0.46),
        VoiceEvidence("voice_2", 2, 3, "Nice to meet you, Amara.", 0.64),
        VoiceEvidence("voice_2", 4, 5, "amara's desk is here", 0.71),
        VoiceEvidence("voice_3", 6, 7, "", 0.0),
    ]
    assert heard_weight(lines, "Amolum") == 0.46
    assert heard_weight(lines, "Amara") == 0.71  # the surest line saying it, in any case, possessive too
    assert heard_weight(lines, "Ama") == 0.71  # not said as a word: the clip's surest line
    assert heard_weight([VoiceEvidence("voice_1", 0, 1, "Hi Bo", 0.0)], "Bo") == MIN_VOTE
    votes = {"Amolum": heard_weight(lines[:1], "Amolum"), "Amara": heard_weight(lines[1:2], "Amara")}
    assert PeopleMixin._winning_name(_person(votes, "Amolum")) == "Amara"
    assert PeopleMixin._winning_name(_person({"Amolum": 1, "Amara": 1}, "Amolum")) == "Amolum"  # whole counts: a tie
