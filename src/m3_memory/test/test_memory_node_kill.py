"""kill -9 of the memory node process while it writes clips: the store is intact and holds a prefix.

Evidence for many short clips is published over DDS; once the node has published a few stored clips
(/m3/memory/clips) it is killed with SIGKILL while later clips are still being memorized and written.
The store must pass SQLite's integrity check and the memory's own, hold clips 0..n-1 with none
missing in between, hold every clip the node announced, each whole (its statements all there),
and open again for more.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import closing

import pytest
import rclpy
from builtin_interfaces.msg import Time
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from m3_interfaces.msg import ClipMemory, VoiceSegment

CLIPS = 40
pytestmark = pytest.mark.reliability


def _stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


def _voice(t0: float, index: int) -> VoiceSegment:
    msg = VoiceSegment(segment_id=index + 1, voice_id="voice_1", start=_stamp(t0), end=_stamp(t0 + 0.5),
                       transcript=f"I put box number {index} in the garage", asr_confidence=0.9, language="en",
                       embedding=[0.6, 0.8], embedding_model="test")  # fmt: skip
    msg.header.stamp = _stamp(t0 + 0.5)
    return msg


def test_kill9_while_clips_are_written_leaves_an_intact_prefix(tmp_path, reliability_counts):
    from m3_memory.store.sqlite_store import MemoryStore

    memory_dir = tmp_path / "memory"
    node = subprocess.Popen(
        [sys.executable, "-m", "m3_memory.memory_node", "--ros-args", "-p", f"memory_dir:={memory_dir}",
         "-p", "clip_seconds:=1.0", "-p", "clip_close_delay:=0.0"],
    )  # fmt: skip
    rclpy.init()
    client = Node("memory_kill_test")
    announced: list[int] = []
    latched = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    client.create_subscription(ClipMemory, "/m3/memory/clips", lambda m: announced.append(m.clip_index), latched)
    voices = client.create_publisher(VoiceSegment, "/m3/voices", QoSProfile(depth=CLIPS + 1))
    try:
        deadline = time.monotonic() + 90
        while voices.get_subscription_count() == 0:
            assert node.poll() is None and time.monotonic() < deadline, "memory_node did not come up"
            rclpy.spin_once(client, timeout_sec=0.1)
        for i in range(CLIPS + 1):  # one utterance per 1 s clip; the last one closes clip CLIPS - 1
            voices.publish(_voice(100.0 + i, i))
        while len(announced) < 3:
            assert node.poll() is None and time.monotonic() < deadline, "no clip was stored"
            rclpy.spin_once(client, timeout_sec=0.02)
        node.send_signal(signal.SIGKILL)  # clips 3.. are being memorized and written
        node.wait(timeout=30)
        reliability_counts.tried(1)
    finally:
        client.destroy_node()
        rclpy.try_shutdown()
        if node.poll() is None:
            node.kill()
            node.wait()
    with closing(MemoryStore(str(memory_dir), create=False)) as store:
        assert store.integrity_check() == []
        export = store.export_json()
    stored = [c["clip_index"] for c in export["clips"]]
    reliability_counts.lost(len(set(announced) - set(stored)))
    assert stored == list(range(len(stored))), stored  # a prefix: nothing missing in between
    assert set(announced) <= set(stored)  # every clip announced as stored is there
    assert len(stored) < CLIPS, "the kill came after the last clip: nothing was in flight"
    texts = {(n["clip_index"], n["text"]) for n in export["text_nodes"]}
    for index in stored:  # each stored clip is whole
        assert any(i == index and f"box number {index} " in t for i, t in texts), (index, sorted(texts))
    reopened = MemoryStore(str(memory_dir), create=False)  # and the store takes more after the crash
    reopened.close()
