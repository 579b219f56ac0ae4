"""Bench/test figures: word error rate, text normalisation, pairwise clustering F1, DER; answers worked by hand."""

import pytest

from m3_perception.metrics import der, normalize_text, pairwise_f1, wer


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


def test_der_by_hand() -> None:
    ref = [(0.0, 2.0, "A"), (2.0, 4.0, "B")]
    perfect = der(ref, [(0.0, 2.0, "x"), (2.0, 4.0, "y")])
    assert perfect.der == 0.0 and perfect.mapping == {"x": "A", "y": "B"} and perfect.speech_s == pytest.approx(4.0)
    swapped = der(ref, [(0.0, 2.0, "B"), (2.0, 4.0, "A")])  # labels are names only: mapped, no error
    assert swapped.der == 0.0 and swapped.mapping == {"B": "A", "A": "B"}
    half_missed = der(ref, [(0.0, 2.0, "x"), (2.0, 3.0, "y")])  # B's second half unlabelled: 1 s of 4
    assert half_missed.missed_s == pytest.approx(1.0) and half_missed.der == pytest.approx(0.25)
    assert half_missed.false_alarm_s == 0.0 and half_missed.confusion_s == 0.0
    false_alarm = der(ref, [(0.0, 2.0, "x"), (2.0, 5.0, "y")])  # 1 s of speech where nobody spoke
    assert false_alarm.false_alarm_s == pytest.approx(1.0) and false_alarm.der == pytest.approx(0.25)
    one_voice = der(ref, [(0.0, 4.0, "x")])  # both turns one voice: one of them is 2 s of confusion
    assert one_voice.confusion_s == pytest.approx(2.0) and one_voice.der == pytest.approx(0.5)
    late = der(ref, [(0.5, 2.5, "x"), (2.5, 4.0, "y")])  # change found 0.5 s late
    assert late.missed_s == pytest.approx(0.5) and late.confusion_s == pytest.approx(0.5)
    assert late.der == pytest.approx(0.25)
    assert der([], []).der == 0.0
