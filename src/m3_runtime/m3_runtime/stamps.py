"""Header stamps → stream time, refusing stamps that would corrupt it (plain module, no rclpy).

A stream's clock may start anywhere (media time 0, sim time, wall-clock time), so the first stamp
sets it. After that, one message stamped far from the stream (a jump of more than `max_jump_s`
either way) is dropped: it would otherwise open a clip 70 million clips ahead, or wrap past
builtin_interfaces/Time's last second. A stream that really moved (a recording played again, a
source switched from media to wall-clock time) is followed again once `REANCHOR_AFTER` messages
in a row agree on its new time. Used by the perception node (per input) and the memory's clip
windows (evidence).
"""

from __future__ import annotations

NS = 1_000_000_000
# builtin_interfaces/Time.sec is an int32: the last representable second is 2**31 - 1 (2038-01-19).
# Stamps are refused a day before it, so stream time derived from them (an utterance's end, a clip's
# end) can never wrap to a negative time.
LATEST_NS = (2**31 - 1 - 86400) * NS
REANCHOR_AFTER = 3  # consecutive messages agreeing on a jumped-to time that make it the stream's time


class StampRejected(ValueError):
    """A stamp that cannot be stream time; the message says why."""


def header_ns(sec: int, nanosec: int) -> int:
    """A builtin_interfaces/Time as integer nanoseconds, refusing what no clock produces."""
    if sec < 0 or not 0 <= nanosec < NS:
        raise StampRejected(f"invalid stamp sec={sec} nanosec={nanosec}")
    return sec * NS + nanosec


class StampGuard:
    """Keeps one stream's time: `admit` each message's stamp before using it."""

    def __init__(self, max_jump_s: float) -> None:
        if max_jump_s <= 0:
            raise ValueError("max_jump_s must be > 0")
        self.max_jump_ns = int(max_jump_s * NS)
        self.newest_ns: int | None = None  # newest admitted stamp: where the stream is
        self._run: list[int] = []  # recent rejected stamps that agree with one another
        self.rejected = 0

    def admit(self, start_ns: int, end_ns: int | None = None) -> bool:
        """Accept [start_ns, end_ns] as stream time or raise StampRejected. True when the stream
        was re-anchored to a new time by this message (callers close what spans the old time)."""
        end_ns = start_ns if end_ns is None else end_ns
        try:
            return self._admit(start_ns, end_ns)
        except StampRejected:
            self.rejected += 1
            raise

    def state(self) -> dict:
        """The guard's state as JSON-able data (a resumed replay continues with it)."""
        return {"newest_ns": self.newest_ns, "run": list(self._run), "rejected": self.rejected}

    def restore(self, state: dict) -> None:
        newest = state["newest_ns"]
        self.newest_ns = None if newest is None else int(newest)
        self._run, self.rejected = [int(s) for s in state["run"]], int(state["rejected"])

    def _admit(self, start_ns: int, end_ns: int) -> bool:
        if end_ns < start_ns:
            raise StampRejected(f"ends {(start_ns - end_ns) / NS:.3f} s before it starts ({start_ns / NS:.3f} s)")
        if start_ns < 0 or end_ns > LATEST_NS:
            raise StampRejected(
                f"stamp {start_ns / NS:.3f} s is outside [0, {LATEST_NS // NS}] s (builtin_interfaces/Time's range)"
            )
        if self.newest_ns is None or abs(start_ns - self.newest_ns) <= self.max_jump_ns:
            self.newest_ns = end_ns if self.newest_ns is None else max(self.newest_ns, end_ns)
            self._run.clear()
            return False
        if self._run and abs(start_ns - self._run[-1]) > self.max_jump_ns:
            self._run.clear()
        self._run.append(start_ns)
        if len(self._run) >= REANCHOR_AFTER:
            self.newest_ns, self._run = end_ns, []
            return True
        raise StampRejected(
            f"stamp {start_ns / NS:.3f} s jumps {(start_ns - self.newest_ns) / NS:+.1f} s from the stream's time "
            f"({self.newest_ns / NS:.3f} s), more than max_stamp_jump_s {self.max_jump_ns / NS:g}"
        )
