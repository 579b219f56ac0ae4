"""The as-of limit rules (m3_memory.search.as_of) on their own: the documented "no limit" values pass, every other
out-of-range value is refused with a message naming the field, never read as "no limit"."""

from __future__ import annotations

import pytest

from m3_memory.search.as_of import NS_PER_S, AsOfError, check_as_of, stamp_ns


@pytest.mark.parametrize(
    ("sec", "nanosec", "ns"),
    [(0, 0, 0), (0, 999_999_999, 999_999_999), (12, 500_000_000, 12 * NS_PER_S + 500_000_000), (2**31 - 1, 0, None)],
)
def test_valid_stamps_become_nanoseconds(sec, nanosec, ns):
    assert stamp_ns(sec, nanosec) == (sec * NS_PER_S + nanosec if ns is None else ns)


@pytest.mark.parametrize(
    ("sec", "nanosec", "message"),
    [
        (0, NS_PER_S, "nanosec must be in 0..999999999, got 1000000000"),
        (5, 2**32 - 1, "nanosec must be in 0..999999999, got 4294967295"),
        (-5, 0, "must not be negative (zero = no limit), got sec -5"),
        (-1, 999_999_999, "must not be negative"),  # -1 ns: not "no limit"
    ],
)
def test_invalid_stamps_are_refused(sec, nanosec, message):
    with pytest.raises(AsOfError) as raised:
        stamp_ns(sec, nanosec)
    assert message in str(raised.value)


@pytest.mark.parametrize(("before_clip", "before_stamp_ns"), [(-1, 0), (0, 0), (7, 0), (-1, 1), (3, 10 * NS_PER_S)])
def test_no_limit_and_real_limits_pass(before_clip, before_stamp_ns):
    check_as_of(before_clip, before_stamp_ns)


@pytest.mark.parametrize(
    ("before_clip", "before_stamp_ns", "message"),
    [
        (-2, 0, "before_clip must be -1 (no limit) or a clip index >= 0, got -2"),
        (-5, 0, "got -5"),
        (-(2**31), 0, "got -2147483648"),
        (-1, -1, "before_stamp must not be negative (zero = no limit), got -1 ns"),
    ],
)
def test_out_of_range_limits_are_refused(before_clip, before_stamp_ns, message):
    with pytest.raises(AsOfError) as raised:
        check_as_of(before_clip, before_stamp_ns)
    assert message in str(raised.value)
