"""The as-of limits of a memory query, checked where they enter: the search API, the memory services and the
control node's Instruct goals (plain Python, no ROS).

`before_clip` -1 means no clip limit and a zero `before_stamp` no time limit (the .srv and .action comments);
every other value outside the valid range is refused rather than read as "no limit": a clip index below -1,
a negative time, or a builtin_interfaces/Time whose nanosec is not in 0..999999999.
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000


class AsOfError(ValueError):
    """An as-of limit that is neither a valid limit nor the documented "no limit" value."""


def stamp_ns(sec: int, nanosec: int) -> int:
    """A builtin_interfaces/Time (sec, nanosec) as nanoseconds; AsOfError when the fields are not a valid time."""
    if not 0 <= nanosec < NS_PER_S:
        raise AsOfError(f"before_stamp.nanosec must be in 0..999999999, got {nanosec}")
    if sec < 0:
        raise AsOfError(f"before_stamp must not be negative (zero = no limit), got sec {sec}")
    return sec * NS_PER_S + nanosec


def check_as_of(before_clip: int, before_stamp_ns: int) -> None:
    """AsOfError unless before_clip is -1 (no limit) or a clip index, and before_stamp_ns is >= 0 (0 = no limit)."""
    if before_clip < -1:
        raise AsOfError(f"before_clip must be -1 (no limit) or a clip index >= 0, got {before_clip}")
    if before_stamp_ns < 0:
        raise AsOfError(f"before_stamp must not be negative (zero = no limit), got {before_stamp_ns} ns")
