"""memory_node in its own process takes perception's voice revisions over real DDS (IdentityUpdate on
/m3/identities/voice_updates): a merge of two voices stored as two persons makes them one person."""

from __future__ import annotations

import subprocess
import sys
import time

import rclpy
from builtin_interfaces.msg import Time
from dds_helpers import call, spin_until
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from m3_interfaces.msg import ClipMemory, EntityMatch, IdentityUpdate, VoiceSegment
from m3_interfaces.srv import GetEntity, GetStats


def stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


def voice_msg(segment_id: int, t0: float, t1: float, voice_id: str, text: str, embedding) -> VoiceSegment:
    msg = VoiceSegment(segment_id=segment_id, voice_id=voice_id, start=stamp(t0), end=stamp(t1), transcript=text,
                       asr_confidence=0.9, language="en", embedding=embedding, embedding_model="test")  # fmt: skip
    msg.header.stamp = stamp(t1)
    return msg


def update_msg(t: float, kind: int, merged_ids, merged_into, corrections=()) -> IdentityUpdate:
    msg = IdentityUpdate(kind=kind, merged_ids=list(merged_ids), merged_into=list(merged_into))
    msg.segment_ids = [c[0] for c in corrections]
    msg.previous_ids, msg.corrected_ids = [c[1] for c in corrections], [c[2] for c in corrections]
    msg.header.stamp = stamp(t)
    return msg


def test_a_voice_merge_over_dds_makes_the_stored_voices_one_person(tmp_path):
    memory_dir, log_path = tmp_path / "memory", tmp_path / "node.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "m3_memory.memory_node", "--ros-args", "-p", f"memory_dir:={memory_dir}",
             "-p", "clip_seconds:=10.0", "-p", "clip_close_delay:=1.0", "-p", "clip_idle_close_s:=3600.0"],
            stderr=log,
        )  # fmt: skip
    rclpy.init()
    node = Node("voice_revision_dds_test")
    try:
        clips: list[ClipMemory] = []
        latched = QoSProfile(
            depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(ClipMemory, "/m3/memory/clips", clips.append, latched)
        voices = node.create_publisher(VoiceSegment, "/m3/voices", 100)
        evidence_qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        updates = node.create_publisher(IdentityUpdate, "/m3/identities/voice_updates", evidence_qos)
        spin_until(node, lambda: proc.poll() is None and voices.get_subscription_count() > 0, 90)
        spin_until(node, lambda: updates.get_subscription_count() > 0, 30)
        # clip 0 [100, 110): two voices, two persons
        voices.publish(voice_msg(1, 101, 103, "voice_1", "hello, I'm Alice", [0.6, 0.8]))
        voices.publish(voice_msg(2, 104, 106, "voice_2", "I like green tea", [0.8, -0.6]))
        time.sleep(0.5)
        voices.publish(voice_msg(3, 112, 113, "voice_1", "so", [0.6, 0.8]))  # clip 0 closes
        spin_until(node, lambda: len(clips) >= 1, 60)
        assert "person_2" in clips[0].entity_ids
        # perception re-clustered: voice_2 was Alice all along. A malformed update is dropped first.
        updates.publish(update_msg(113, EntityMatch.FACE, ["voice_2"], ["voice_1"]))
        updates.publish(update_msg(113, EntityMatch.VOICE, ["voice_2", "voice_3"], ["voice_1"]))
        updates.publish(update_msg(113, EntityMatch.VOICE, ["voice_2"], ["voice_1"], [(2, "voice_2", "voice_1")]))
        time.sleep(1.0)
        voices.publish(voice_msg(4, 123, 124, "voice_1", "bye", [0.6, 0.8]))  # clip 1 closes
        spin_until(node, lambda: len(clips) >= 2, 60)
        assert list(clips[1].entity_ids) == ["voice_1", "person_1"]
        response = call(node, GetEntity, "/m3/memory/get_entity", GetEntity.Request(entity_id="person_2"))
        entity = response.entity
        assert (entity.entity_id, entity.name, list(entity.aliases)) == ("person_1", "Alice", ["person_2"])
        assert list(entity.member_ids) == ["voice_1", "voice_2"]
        stats = call(node, GetStats, "/m3/memory/get_stats", GetStats.Request())
        assert (stats.voices, stats.persons) == (2, 1) and proc.poll() is None
        logged = log_path.read_text()
        assert "ignored voice update: kind 2 is not EntityMatch.VOICE (4)" in logged  # (then throttled)
        assert "1 voice correction(s) came after their clip was stored: not applied (1 so far)" in logged
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
