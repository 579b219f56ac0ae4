"""Header stamps into stream time: StampGuard (jumps, range, re-anchoring) and StreamClock (jitter)."""

import pytest

from m3_perception.voices.pipeline import StreamClock
from m3_runtime.stamps import LATEST_NS, NS, REANCHOR_AFTER, StampGuard, StampRejected, header_ns

HOUR = 3600.0


@pytest.mark.parametrize("first_s", [0, 1000, 1_700_000_000])
def test_the_first_stamp_sets_the_stream_time_wherever_it_is(first_s: int) -> None:
    """Replays start at media time 0, sim time, or wall-clock time."""
    guard = StampGuard(HOUR)
    assert guard.admit(first_s * NS) is False
    assert guard.admit((first_s + 5) * NS) is False and guard.newest_ns == (first_s + 5) * NS


def test_one_stamp_far_ahead_or_behind_is_refused_and_the_stream_goes_on() -> None:
    guard = StampGuard(HOUR)
    guard.admit(1000 * NS)
    with pytest.raises(StampRejected, match=r"jumps \+2000000\.0 s .* more than max_stamp_jump_s 3600"):
        guard.admit(2_001_000 * NS)
    assert guard.admit(1001 * NS) is False and guard.newest_ns == 1001 * NS
    assert guard.admit(990 * NS) is False  # back by less than the limit: late, not a jump
    guard.admit(4000 * NS)
    with pytest.raises(StampRejected, match=r"jumps -3700\.0 s"):
        guard.admit(300 * NS)
    assert guard.rejected == 2 and guard.newest_ns == 4000 * NS


def test_stamps_that_would_wrap_time_are_refused_even_first() -> None:
    """Issue 13: audio stamped near INT32_MAX made perception publish end = -2147483647."""
    guard = StampGuard(HOUR)
    with pytest.raises(StampRejected, match="outside"):
        guard.admit((2**31 - 1) * NS)
    with pytest.raises(StampRejected, match="outside"):
        guard.admit(LATEST_NS - NS, LATEST_NS + 1)
    assert guard.newest_ns is None
    with pytest.raises(StampRejected, match="invalid stamp"):
        header_ns(-1, 0)
    with pytest.raises(StampRejected, match="invalid stamp"):
        header_ns(5, NS)
    assert header_ns(5, 7) == 5 * NS + 7


def test_a_span_that_ends_before_it_starts_is_refused() -> None:
    guard = StampGuard(HOUR)
    with pytest.raises(StampRejected, match=r"ends 2\.000 s before it starts"):
        guard.admit(10 * NS, 8 * NS)


def test_a_stream_that_moved_for_good_is_followed_after_a_few_messages() -> None:
    """A recording played again, or a source switched to wall-clock time: REANCHOR_AFTER in a row agree."""
    guard = StampGuard(HOUR)
    guard.admit(1_700_000_000 * NS)
    for k in range(REANCHOR_AFTER - 1):
        with pytest.raises(StampRejected):
            guard.admit((10 + k) * NS)
    assert guard.admit((10 + REANCHOR_AFTER) * NS) is True
    assert guard.admit((11 + REANCHOR_AFTER) * NS) is False and guard.newest_ns == (11 + REANCHOR_AFTER) * NS


def test_bad_stamps_between_good_ones_never_move_the_stream() -> None:
    guard = StampGuard(HOUR)
    guard.admit(100 * NS)
    for k in range(10):
        with pytest.raises(StampRejected):
            guard.admit(2_000_000_000 * NS)
        assert guard.admit((101 + k) * NS) is False
    assert guard.newest_ns == 110 * NS and guard.rejected == 10


def test_stream_clock_keeps_time_running_forward_through_jitter() -> None:
    clock = StreamClock(max_overlap_s=0.5)
    clock.add_chunk(100.0, 1600)  # 100.0 .. 100.1
    assert not clock.goes_back(99.95)
    clock.add_chunk(99.95, 1600)  # stamped 0.15 s early: continues at 100.1
    assert clock.time_of(1600) == pytest.approx(100.1) and clock.time_of(3199) > clock.time_of(1599)
    clock.add_chunk(105.0, 1600)  # a gap (chunks lost): the stamp is followed
    assert clock.time_of(3200) == pytest.approx(105.0)
    assert clock.goes_back(104.0) and not clock.goes_back(104.7)
