"""Bench/test figures: word error rate and pairwise clustering F1."""

import pytest

from m3_perception.metrics import pairwise_f1, wer


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
