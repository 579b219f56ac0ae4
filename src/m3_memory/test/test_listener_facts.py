"""What a line says about the one it is said to (memorize.listener_facts), and the memorizer storing it."""

from __future__ import annotations

import pytest

from m3_memory.memorize.listener_facts import answered_fact, listener_facts, statement_fact
from m3_memory.memorize.name_mentions import UNCERTAIN, Turns


def turns(*lines: tuple[str, str], starts: list[int] | None = None) -> Turns:
    speakers = [who for who, _ in lines]
    ends = [s + 2_000_000_000 for s in starts] if starts else []
    return Turns(speakers, [[] for _ in lines], [text for _, text in lines], starts=starts or [], ends=ends)


@pytest.mark.parametrize(
    ("clause", "fact"),
    [
        ("you hate onions", "<voice_2> hates onions."),
        ("you teach the evening class", "<voice_2> teaches the evening class."),
        ("you can take the van on Fridays", "<voice_2> can take the van on Fridays."),
        ("you never wash my mug", "<voice_2> never washes <voice_1>'s mug."),
        ("you don't eat meat", "<voice_2> does not eat meat."),
        ("you usually cycle to work", "<voice_2> usually cycles to work."),
        ("you're allergic to cats", "<voice_2> is allergic to cats."),
        ("you are the new porter", "<voice_2> is the new porter."),
        ("your locker is next to mine", "The locker of <voice_2> is next to <voice_1>'s."),
        ("your keys were on the piano", "The keys of <voice_2> were on the piano."),
    ],
)
def test_a_statement_about_you_is_a_fact_about_the_listener(clause: str, fact: str) -> None:
    assert statement_fact(clause, "voice_1", "voice_2") == fact


@pytest.mark.parametrize(
    "clause",
    ["you know the market closes early", "you're welcome", "you two should meet", "you all did well", "you're right"],
)
def test_set_phrases_and_you_to_a_group_say_nothing_of_one_listener(clause: str) -> None:
    assert statement_fact(clause, "voice_1", "voice_2") is None


@pytest.mark.parametrize(
    ("question", "answer", "fact"),
    [
        ("are you still running the book club", "Yes, every month.", "<voice_2> is still running the book club."),
        ("do you speak Portuguese", "Yeah, a little.", "<voice_2> speaks Portuguese."),
        ("do you take sugar", "No, thanks.", "<voice_2> does not take sugar."),
        ("can you pick me up at the station", "Sure, at six.", "<voice_2> can pick <voice_1> up at the station."),
        ("will you water my plants", "Of course.", "<voice_2> will water <voice_1>'s plants."),
        ("have you finished the report", "No, not yet.", "<voice_2> has not finished the report."),
    ],
)
def test_a_yes_or_no_answer_states_the_question_of_the_one_who_answered(question: str, answer: str, fact: str) -> None:
    assert answered_fact(question, answer, "voice_1", "voice_2") == fact


def test_an_answer_that_is_neither_yes_nor_no_states_nothing() -> None:
    assert answered_fact("do you know where the ladder is", "It's in the shed.", "voice_1", "voice_2") is None
    assert answered_fact("where do you live", "Yes.", "voice_1", "voice_2") is None


def test_the_turns_tell_who_you_is() -> None:
    clip = turns(
        ("voice_1", "I can't eat this, it has olives."),
        ("voice_2", "Oh, I know you hate olives. I'll make you toast."),
        ("voice_1", "Thanks. Lena, are you driving to the coast tomorrow?"),
        ("voice_3", "Yes, early in the morning."),
    )
    assert listener_facts(clip) == [(2, "<voice_1> hates olives."), (4, "<voice_3> is driving to the coast tomorrow.")]


def test_an_answer_responds_to_the_one_who_spoke_before() -> None:
    """ "Then you can..." opens no answer; "Yes, you ..." answers the speaker before."""
    clip = turns(
        ("voice_1", "I trained as a baker in Porto."),
        ("voice_2", "Yes, you told me. Then you can bake the bread on Mondays."),
        ("voice_3", "Good morning everyone."),
    )
    assert (2, "<voice_1> can bake the bread on Mondays.") in listener_facts(clip)


def test_nothing_when_a_speaker_is_uncertain_or_the_answer_comes_late() -> None:
    uncertain = turns(("voice_1", "Do you play chess?"), (UNCERTAIN, "Yes, on Sundays."), ("voice_1", "Nice."))
    assert listener_facts(uncertain) == []
    assert listener_facts(turns((UNCERTAIN, "You hate olives."), ("voice_2", "I do."))) == []
    late = turns(("voice_1", "Do you play chess?"), ("voice_2", "Yes."), starts=[0, 14_000_000_000])
    assert listener_facts(late) == []


def test_the_rules_memorizer_stores_them_about_the_listener() -> None:
    from m3_memory.graph.records import ClipEvidence, VoiceEvidence
    from m3_memory.memorize.rules import RulesMemorizer

    lines = [
        ("voice_1", "My shift starts at noon."),
        ("voice_2", "Then you can open the shop on Tuesdays."),
        ("voice_1", "Fine by me."),
    ]
    voices = [
        VoiceEvidence(who, i * 3_000_000_000, i * 3_000_000_000 + 2_000_000_000, text, 0.9, segment_id=i)
        for i, (who, text) in enumerate(lines)
    ]
    clip = ClipEvidence(clip_index=0, start_ns=0, end_ns=10_000_000_000, voices=voices)
    ids = {"voice_1": "voice_1", "voice_2": "voice_2"}
    out = RulesMemorizer().memorize(clip, ids, lambda e: None)
    texts = [d.text for d in out.drafts]
    assert "<voice_1> can open the shop on Tuesdays." in texts
    assert not any("<voice_2> can open" in t for t in texts)


def test_a_statement_about_you_is_no_fact_about_the_speaker() -> None:
    from m3_memory.memorize.rules import self_facts

    assert self_facts("I know you hate onions. I bake on Sundays.", "<voice_1>") == ["<voice_1> bakes on Sundays."]


def test_a_question_that_ended_the_previous_clip_is_answered_in_this_one() -> None:
    from m3_memory.graph.records import LineBefore

    clip = turns(("voice_3", "Yes, every Thursday."), ("voice_1", "Lovely."), starts=[31_000_000_000, 34_000_000_000])
    clip.present = ["voice_3", "voice_1"]
    clip.before = LineBefore("voice_1", "Tomas, are you still running the chess club?", 29_500_000_000)
    assert listener_facts(clip) == [(1, "<voice_3> is still running the chess club.")]
    clip.before = LineBefore("voice_2", "Can you drive me home?", 29_500_000_000)  # the asker is not in the clip
    assert listener_facts(clip) == []
    clip.before = LineBefore("voice_1", "Are you coming?", 10_000_000_000)  # too long before
    assert listener_facts(clip) == []


def test_the_memory_gives_a_clip_the_line_before_it(memory) -> None:
    """Memory.ingest hands the previous clip's last line to the next clip: the answer in clip 1 to the
    question that ended clip 0 is stored about the one who answered."""
    from m3_memory.graph.records import ClipEvidence, VoiceEvidence

    def line(who: str, start_s: float, text: str, n: int) -> VoiceEvidence:
        return VoiceEvidence(who, int(start_s * 1e9), int((start_s + 2) * 1e9), text, 0.9, segment_id=n)

    s = 1_000_000_000
    first = [line("voice_1", 20, "I run the bakery.", 0), line("voice_2", 27, "Do you bake bread on Sundays?", 1)]
    memory.ingest(ClipEvidence(0, 0, 30 * s, voices=first))
    memory.ingest(ClipEvidence(1, 30 * s, 60 * s, voices=[line("voice_1", 30.5, "Yes, very early.", 2)]))
    texts = [hit.text for hit in memory.search.search_node("bakes bread on Sundays", top_k=10)]
    assert any(t.endswith("bakes bread on Sundays.") for t in texts), texts
