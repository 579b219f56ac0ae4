"""Issue 21, D8, over real DDS: memory_node in its own process closes the open clip on perception's
processed_until and when the stream stops, without later evidence and without SIGTERM.

Stamps are a recording's media time (100 s...), as with `m3 run` + `m3 play` without use_sim_time:
the node's own clock (wall time) never agrees with them, so before the fix the last clip of a
recording stayed open until the node was stopped.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import rclpy
from builtin_interfaces.msg import Time
from dds_helpers import call, spin_until
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from m3_interfaces.msg import ClipMemory, VoiceSegment
from m3_interfaces.srv import GetStats, SearchClip

IDLE_S = 2.0
MARGIN_S = 10.0  # start-up of the memorizer worker, DDS, a loaded machine


def stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    memory_dir = tmp_path_factory.mktemp("idle") / "memory"
    proc = subprocess.Popen(
        [sys.executable, "-m", "m3_memory.memory_node", "--ros-args", "-p", f"memory_dir:={memory_dir}",
         "-p", "clip_seconds:=10.0", "-p", "clip_close_delay:=2.0", "-p", f"clip_idle_close_s:={IDLE_S}"],
    )  # fmt: skip
    rclpy.init()
    node = Node("memory_idle_test")
    clips: list[tuple[float, ClipMemory]] = []
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(ClipMemory, "/m3/memory/clips", lambda m: clips.append((time.monotonic(), m)), latched)
    voices = node.create_publisher(VoiceSegment, "/m3/voices", 100)
    progress = node.create_publisher(Clock, "/m3/perception/processed_until", 10)

    def subscribed() -> bool:
        assert proc.poll() is None, "memory_node exited during start-up"
        return voices.get_subscription_count() > 0 and progress.get_subscription_count() > 0

    spin_until(node, subscribed, 90)
    yield {"node": node, "proc": proc, "clips": clips, "voices": voices, "progress": progress}
    node.destroy_node()
    rclpy.try_shutdown()
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def say(system, t0: float, t1: float, text: str) -> None:
    msg = VoiceSegment(segment_id=int(t0 * 10), voice_id="voice_1", start=stamp(t0), end=stamp(t1), transcript=text,
                       asr_confidence=0.9, language="en", embedding=[0.6, 0.8], embedding_model="test")  # fmt: skip
    msg.header.stamp = stamp(t1)
    system["voices"].publish(msg)


def processed_until(system, seconds: float) -> None:
    system["progress"].publish(Clock(clock=stamp(seconds)))


def spin_for(node: Node, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)


@pytest.mark.reliability
def test_a_moving_stream_clock_keeps_the_clip_open_then_closes_it(system):
    """Perception keeps processing (processed_until moves) for 3 idle times between two utterances of
    one clip: the clip stays open and holds both; processed_until past its end + close delay closes it."""
    node, clips = system["node"], system["clips"]
    say(system, 100.0, 102.0, "I like green tea")
    for step in range(1, 13):  # 6 s of wall time, stream time 102.5 .. 108
        processed_until(system, 102.0 + step / 2)
        spin_for(node, 0.5)
    say(system, 108.0, 109.0, "I put the keys in the drawer")
    processed_until(system, 111.0)  # past the end (110), within the close delay (2 s)
    spin_for(node, 1.5)
    assert clips == [], "the clip closed before the stream clock passed its end + clip_close_delay"
    processed_until(system, 112.5)
    spin_until(node, lambda: len(clips) >= 1, MARGIN_S)
    clip = clips[0][1]
    assert (clip.clip_index, clip.start.sec, clip.end.sec) == (0, 100, 110)
    texts = " ".join(m.text for m in clip.episodic + clip.semantic)
    assert "green tea" in texts and "drawer" in texts, texts


@pytest.mark.reliability
def test_the_last_clip_is_stored_when_the_stream_stops(system):
    """The recording ends inside a window; nothing else arrives and nobody stops the node."""
    node, clips = system["node"], system["clips"]
    say(system, 120.0, 122.0, "my dog is called Charlie")
    processed_until(system, 123.0)  # the end of the recording: perception stops there
    sent = time.monotonic()
    spin_until(node, lambda: any(m.start.sec == 120 for _, m in clips), IDLE_S + MARGIN_S)
    arrived, clip = next((t, m) for t, m in clips if m.start.sec == 120)
    assert arrived - sent >= IDLE_S - 0.5, f"closed after {arrived - sent:.1f} s, before the idle time ({IDLE_S} s)"
    assert clip.end.sec == 130
    assert system["proc"].poll() is None  # no SIGTERM, no restart: the running node stored it
    stats = call(node, GetStats, "/m3/memory/get_stats", GetStats.Request())
    assert (stats.error_code, stats.clips, stats.last_clip_index) == (0, len(clips), clip.clip_index)
    found = call(node, SearchClip, "/m3/memory/search_clip", SearchClip.Request(query="what is the dog called?"))
    assert found.error_code == SearchClip.Response.OK and found.clips
    assert found.clips[0].clip_index == clip.clip_index
    assert any("Charlie" in m.text for m in found.clips[0].episodic + found.clips[0].semantic)


def test_a_line_of_the_open_clip_is_found_before_the_clip_is_stored(system):
    """Asked right after hearing it, the memory answers from the clip still open (search/heard.py): the
    line comes back word for word in a clip marked heard; once the stream stops and the clip is stored,
    the stored clip answers instead."""
    node, clips = system["node"], system["clips"]
    say(system, 140.0, 142.0, "Two rye loaves cost six euros")
    request = SearchClip.Request(query="How much do the rye loaves cost?", threshold=0.3)
    deadline, step, found = time.monotonic() + MARGIN_S, 0, None
    while found is None:
        assert time.monotonic() < deadline, "the open clip's line was never found"
        step += 1
        processed_until(system, 142.0 + step / 10)  # the stream goes on inside the window: it stays open
        reply = call(node, SearchClip, "/m3/memory/search_clip", request)
        assert reply.error_code == SearchClip.Response.OK, reply.error_message
        found = next((c for c in reply.clips if c.heard), None)
    assert not any(m.start.sec == 140 for _, m in clips), "the clip was stored before the line was found"
    assert (found.clip_index, found.start.sec, found.end.sec, list(found.semantic)) == (4, 140, 150, [])
    [line] = found.episodic
    assert line.node_id == "heard_4_0" and line.kind == "episodic" and "six euros" in line.text
    assert (line.start.sec, line.end.sec) == (140, 142)
    spin_until(node, lambda: any(m.start.sec == 140 for _, m in clips), IDLE_S + MARGIN_S)  # the stream stopped
    reply = call(node, SearchClip, "/m3/memory/search_clip", request)
    assert [(c.clip_index, c.heard) for c in reply.clips][:1] == [(4, False)]
    assert any("six euros" in m.text for m in reply.clips[0].episodic)
