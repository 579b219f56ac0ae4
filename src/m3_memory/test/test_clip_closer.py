"""Pure logic of ClipCloser (issue 21, D8): the open clip closes on the stream clock and when the stream
stopped, never early because wall time passed while the stream clock was still moving."""

from __future__ import annotations

import pytest
from m3mem_evidence import S, face, voice

from m3_memory.clip_window import ClipCloser, ClipWindows

IDLE_S = 5.0


def closer(clip_seconds: float = 30.0, close_delay_s: float = 2.0) -> ClipCloser:
    return ClipCloser(ClipWindows(clip_seconds=clip_seconds, close_delay_s=close_delay_s), IDLE_S)


def summary(clips) -> list[tuple[int, int, int, list[str]]]:
    return [(c.clip_index, c.start_ns // S, c.end_ns // S, [v.transcript for v in c.voices]) for c in clips]


def test_the_last_clip_closes_when_nothing_arrives_for_the_idle_time():
    """The D8 case: the recording ended inside a window; nothing later comes, no SIGTERM."""
    c = closer()
    c.windows.add(voice("voice_1", 100, 103, "my dog is called Charlie"))
    c.heard(wall_ns=50 * S)
    c.clock("progress", 104 * S, wall_ns=51 * S)  # perception got to the end of the recording, then nothing
    assert c.on_clock() == [] and c.on_idle(55 * S) == []  # 4 s of wall time: not yet
    assert c.on_idle(int(55.9 * S)) == []
    assert summary(c.on_idle(56 * S)) == [(0, 100, 130, ["my dog is called Charlie"])]
    assert c.on_idle(80 * S) == []  # closed once


def test_a_stream_clock_that_keeps_moving_never_closes_a_clip_early():
    """A replay whose perception is slow: minutes of wall time between two utterances of one clip,
    while processed_until (or /clock) keeps moving. The clip holds both; the stream clock closes it."""
    c = closer()
    c.windows.add(voice("voice_1", 100, 103, "I like green tea"))
    c.heard(0)
    for step in range(1, 60):  # 59 s of wall time, a quarter stream second each: stream time 100..114.75
        c.clock("progress", 100 * S + step * S // 4, wall_ns=step * S)
        assert c.on_clock() == [] and c.on_idle(step * S + S // 2) == []
    c.windows.add(voice("voice_1", 115, 118, "I put the keys in the drawer"))
    c.heard(60 * S)
    c.clock("sim", 131 * S, wall_ns=61 * S)  # /clock: within the close delay of the window's end
    assert c.on_clock() == [] and c.on_idle(65 * S) == []
    c.clock("sim", 132 * S, wall_ns=66 * S)
    assert summary(c.on_clock()) == [(0, 100, 130, ["I like green tea", "I put the keys in the drawer"])]


def test_a_clock_standing_still_is_no_input():
    """processed_until republished at the same value (or a stuck /clock) says nothing of the stream."""
    c = closer()
    c.windows.add(voice("voice_1", 100, 103, "hello"))
    c.clock("progress", 103 * S, wall_ns=0)
    for wall in range(1, 5):
        c.clock("progress", 103 * S, wall_ns=wall * S)
    assert c.on_idle(int(4.9 * S)) == []
    assert [x.clip_index for x in c.on_idle(5 * S)] == [0]


def test_the_stream_clock_closes_only_where_it_agrees_with_the_evidence():
    c = closer()
    c.windows.add(voice("voice_1", 100, 103, "hello"))
    c.clock("sim", 1_700_000_000 * S, wall_ns=0)  # wall-clock /clock against a recording's media time
    assert c.on_clock() == []
    assert c.on_clock(system_ns=1_700_000_001 * S) == []  # the live system clock, another time base here
    assert [x.clip_index for x in c.on_clock(system_ns=132 * S)] == [0]  # the live case: stamps are its time


def test_only_readings_that_moved_close_windows():
    """A stale reading from an earlier, later-stamped stream must not close every new window at once."""
    c = closer(clip_seconds=10.0, close_delay_s=0.0)
    c.windows.add(face("face_1", 100.0))
    c.clock("progress", 115 * S, wall_ns=0)
    assert [x.clip_index for x in c.on_clock()] == [0]
    c.windows.add(face("face_1", 112.0))  # the stream goes on; perception has not published since
    assert c.on_clock() == []
    c.clock("progress", 115 * S, wall_ns=S)  # the same value again
    assert c.on_clock() == []
    c.clock("progress", 120 * S, wall_ns=2 * S)
    assert [x.clip_index for x in c.on_clock()] == [1]


def test_what_comes_after_an_idle_close_is_kept():
    """A stall longer than the idle time: the clip is stored, later evidence of its window joins the next."""
    c = closer(clip_seconds=10.0, close_delay_s=0.0)
    c.windows.add(voice("voice_1", 100, 102, "first"))
    c.heard(0)
    assert [x.clip_index for x in c.on_idle(10 * S)] == [0]
    c.windows.add(voice("voice_1", 104, 106, "second"))
    c.heard(11 * S)
    assert summary(c.windows.flush()) == [(1, 110, 120, ["second"])]


def test_replay_clips_are_unchanged_when_the_idle_close_ends_the_stream():
    """The node's idle close at the end of a stream stores what `m3 replay`'s final flush stores."""
    evidence = [voice("voice_1", 100 + 7 * i, 103 + 7 * i, f"line {i}") for i in range(13)]
    replay = ClipWindows(clip_seconds=30.0, close_delay_s=2.0)
    expected = [clip for item in evidence for clip in replay.add(item)] + replay.flush()
    c = closer()
    got = []
    for wall, item in enumerate(evidence):
        got += c.windows.add(item)
        c.heard(wall * S)
        got += c.on_idle(wall * S)
    got += c.on_idle(12 * S + int(IDLE_S * S))
    assert summary(got) == summary(expected) and len(got) == 3


def test_idle_time_must_be_positive():
    with pytest.raises(ValueError, match="clip_idle_close_s"):
        ClipCloser(ClipWindows(), 0.0)
