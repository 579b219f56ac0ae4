"""Bench/test figures: word error rate, text normalisation, pairwise clustering F1, DER; answers worked by hand."""

import pytest

from m3_perception.material.metrics import der, normalize_text, pairwise_f1, voice_ids_per_speaker, wer


def test_wer() -> None:
    assert wer("the red folder", "the red folder") == 0.0
    assert wer("the red folder", "the felt folder") == pytest.approx(1 / 3)
    assert wer("a b", "") == 1.0 and wer("a b", "a x b c") == 1.0


def test_pairwise_f1() -> None:
    assert pairwise_f1(["a", "a", "b"], ["x", "x", "y"]) == 1.0  # label names do not matter
    assert pairwise_f1(["a", "a", "b", "b"], ["x", "x", "x", "x"]) == pytest.approx(2 * 2 / (2 * 2 + 4))
    assert pairwise_f1(["a", "b"], ["x", "y"]) == 1.0 and pairwise_f1(["a", "b"], ["x", "x"]) == 0.0
    with pytest.raises(ValueError, match="length"):
        pairwise_f1(["a"], [])


def test_normalize_text_by_hand() -> None:
    assert normalize_text("Mr. Smith's 21st birthday: 1,000 guests & 3.5% off!") == (
        "mister smiths twenty first birthday one thousand guests and three point five percent off"
    )
    assert normalize_text("Ninety-nine DON'T, 12th, 40 and 100") == ("ninety nine do not twelfth forty and one hundred")
    assert normalize_text("I'm sure we’ll see Bob's car") == "i am sure we will see bobs car"  # 's stays ambiguous
    assert normalize_text("  \u2019Tis 7 o\u2019clock\u2026 ") == "tis seven oclock"
    assert normalize_text("") == ""


def test_der_by_hand_without_collar() -> None:
    """Every frame scored (collar=0): the figures of the earlier, collar-free `der`."""
    ref = [(0.0, 2.0, "A"), (2.0, 4.0, "B")]
    perfect = der(ref, [(0.0, 2.0, "x"), (2.0, 4.0, "y")], collar=0.0)
    assert perfect.der == 0.0 and perfect.mapping == {"x": "A", "y": "B"} and perfect.speech_s == pytest.approx(4.0)
    swapped = der(ref, [(0.0, 2.0, "B"), (2.0, 4.0, "A")], collar=0.0)  # labels are names only: mapped, no error
    assert swapped.der == 0.0 and swapped.mapping == {"B": "A", "A": "B"}
    half_missed = der(ref, [(0.0, 2.0, "x"), (2.0, 3.0, "y")], collar=0.0)  # B's second half unlabelled: 1 s of 4
    assert half_missed.missed_s == pytest.approx(1.0) and half_missed.der == pytest.approx(0.25)
    assert half_missed.false_alarm_s == 0.0 and half_missed.confusion_s == 0.0
    false_alarm = der(ref, [(0.0, 2.0, "x"), (2.0, 5.0, "y")], collar=0.0)  # 1 s of speech where nobody spoke
    assert false_alarm.false_alarm_s == pytest.approx(1.0) and false_alarm.der == pytest.approx(0.25)
    one_voice = der(ref, [(0.0, 4.0, "x")], collar=0.0)  # both turns one voice: one of them is 2 s of confusion
    assert one_voice.confusion_s == pytest.approx(2.0) and one_voice.der == pytest.approx(0.5)
    late = der(ref, [(0.5, 2.5, "x"), (2.5, 4.0, "y")], collar=0.0)  # change found 0.5 s late
    assert late.missed_s == pytest.approx(0.5) and late.confusion_s == pytest.approx(0.5)
    assert late.der == pytest.approx(0.25)
    assert der([], []).der == 0.0 and der([], [], collar=0.0).der == 0.0


def test_der_collar_leaves_boundaries_unscored() -> None:
    """±0.25 s around each reference boundary is not scored (md-eval -c 0.25)."""
    ref = [(0.0, 2.0, "A"), (2.0, 4.0, "B")]
    assert der(ref, [(0.0, 2.2, "x"), (2.2, 4.0, "y")]).der == 0.0  # a change 0.2 s late: inside the collar
    assert der(ref, [(0.0, 2.2, "x"), (2.2, 4.0, "y")], collar=0.0).der == pytest.approx(0.05)
    # scored: A 0.25-1.75, B 2.25-3.75 (3 s); x from 0.5 misses 0.25 s of A and holds 0.25 s of B
    late = der(ref, [(0.5, 2.5, "x"), (2.5, 4.0, "y")])
    assert late.speech_s == pytest.approx(3.0) and late.missed_s == pytest.approx(0.25)
    assert late.confusion_s == pytest.approx(0.25) and late.false_alarm_s == 0.0
    assert late.der == pytest.approx(0.5 / 3)
    # a speaker's touching pieces are one stretch: no collar at 1.0
    split = der([(0.0, 1.0, "A"), (1.0, 2.0, "A")], [(0.0, 1.0, "x"), (1.0, 2.0, "y")])
    assert split.speech_s == pytest.approx(1.5) and split.confusion_s == pytest.approx(0.75)


def test_der_scores_overlapped_speech_per_speaker() -> None:
    """Two reference speakers at once count twice in the speech time; one hypothesis voice there
    misses the other (pyannote.metrics / md-eval)."""
    ref = [(0.0, 3.0, "A"), (2.0, 4.0, "B")]  # 1 s overlap: speech 3 + 2 = 5 s
    one_at_a_time = der(ref, [(0.0, 2.5, "x"), (2.5, 4.0, "y")], collar=0.0)
    assert one_at_a_time.speech_s == pytest.approx(5.0) and one_at_a_time.missed_s == pytest.approx(1.0)
    assert one_at_a_time.confusion_s == 0.0 and one_at_a_time.der == pytest.approx(0.2)
    assert one_at_a_time.mapping == {"x": "A", "y": "B"}
    assert der(ref, [(0.0, 3.0, "x"), (2.0, 4.0, "y")], collar=0.0).der == 0.0
    # a second hypothesis voice where only one person speaks: false alarm, not confusion
    doubled = der([(0.0, 2.0, "A")], [(0.0, 2.0, "x"), (1.0, 2.0, "y")], collar=0.0)
    assert doubled.false_alarm_s == pytest.approx(1.0) and doubled.der == pytest.approx(0.5)
    # with the collar (unscored: 0-0.25, 1.75-2.25, 2.75-3.25, 3.75-4): A 0.25-1.75 and 2.25-2.75,
    # B 2.25-2.75 and 3.25-3.75, so speech 3 s; the overlap's scored 0.5 s misses one speaker
    collared = der(ref, [(0.0, 2.5, "x"), (2.5, 4.0, "y")])
    assert collared.speech_s == pytest.approx(3.0) and collared.missed_s == pytest.approx(0.5)
    assert collared.der == pytest.approx(0.5 / 3)


def test_der_hypothesis_with_extra_speakers() -> None:
    """One true speaker split over two voices: the larger part is mapped, the rest is confusion."""
    ref = [(0.0, 4.0, "A"), (4.0, 6.0, "B")]
    hyp = [(0.0, 2.5, "x"), (2.5, 4.0, "z"), (4.0, 6.0, "y")]
    d = der(ref, hyp, collar=0.0)
    assert d.mapping == {"x": "A", "y": "B"} and d.confusion_s == pytest.approx(1.5)
    assert d.der == pytest.approx(1.5 / 6)
    # collar: scored A 0.25-3.75, B 4.25-5.75 (5 s); z's 1.25 s scored are confusion (no collar at
    # the hypothesis' own change at 2.5 s)
    c = der(ref, hyp)
    assert c.speech_s == pytest.approx(5.0) and c.confusion_s == pytest.approx(1.25) and c.der == pytest.approx(0.25)


def test_voice_ids_per_speaker_by_hand() -> None:
    ref = [(0.0, 2.0, "A"), (2.0, 4.0, "B"), (4.0, 6.0, "A")]
    assert voice_ids_per_speaker(ref, [(0.0, 2.0, "x"), (2.0, 4.0, "y"), (4.0, 6.0, "x")]) == 1.0
    assert voice_ids_per_speaker(ref, [(0.0, 2.0, "x"), (2.0, 4.0, "y"), (4.0, 6.0, "z")]) == 1.5  # A: x, z
    # each turn's majority voice counts: 0.4 s of y spilling into A's first turn is not a second id
    assert voice_ids_per_speaker(ref, [(0.0, 1.6, "x"), (1.6, 4.0, "y"), (4.0, 6.0, "x")]) == 1.0
    assert voice_ids_per_speaker(ref, [(2.0, 4.0, "y")]) == 0.5  # A never labelled: 0 ids for A
    # B's word over A's turn (0.5-1.0) is not solo time: the hypothesis' A voice there is no id of B
    word = [(0.0, 2.0, "A"), (0.5, 1.0, "B"), (2.0, 4.0, "B")]
    assert voice_ids_per_speaker(word, [(0.0, 2.0, "x"), (2.0, 4.0, "y")]) == 1.0
