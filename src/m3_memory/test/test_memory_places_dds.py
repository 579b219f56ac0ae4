"""memory_node in its own process with a pose topic and a regions file, over real DDS: the robot's
/amcl_pose (PoseWithCovarianceStamped) gives each memory its place and region, poses in another frame are
dropped, and search_node / search_clip filter by region, point and time window."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest
import rclpy
from builtin_interfaces.msg import Time
from dds_helpers import call, spin_until
from geometry_msgs.msg import PoseWithCovarianceStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from m3_interfaces.msg import ClipMemory, PlaceFilter, VoiceSegment
from m3_interfaces.srv import SearchClip, SearchNode

REGIONS = """
frame_id: map
regions:
  kitchen: {polygon: [[0, 0], [5, 0], [5, 4], [0, 4]]}
  garden: {circle: {center: [20, 10], radius: 3}}
"""


def stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    work = tmp_path_factory.mktemp("places_dds")
    (work / "regions.yaml").write_text(REGIONS)
    node_proc = subprocess.Popen(
        [sys.executable, "-m", "m3_memory.memory_node", "--ros-args", "-p", f"memory_dir:={work / 'memory'}",
         "-p", "clip_seconds:=10.0", "-p", "clip_close_delay:=1.0", "-p", "pose_topic:=/amcl_pose",
         "-p", "pose_type:=pose_with_covariance_stamped", "-p", "pose_wait_s:=20.0",
         "-p", f"regions_file:={work / 'regions.yaml'}"],
    )  # fmt: skip
    rclpy.init()
    client = Node("memory_places_dds_test")
    clips: list[ClipMemory] = []
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    client.create_subscription(ClipMemory, "/m3/memory/clips", clips.append, latched)
    pubs = {
        "pose": client.create_publisher(PoseWithCovarianceStamped, "/amcl_pose", 100),
        "voices": client.create_publisher(VoiceSegment, "/m3/voices", 100),
    }

    def subscribed() -> bool:
        assert node_proc.poll() is None, "memory_node exited during start-up"
        return all(p.get_subscription_count() > 0 for p in pubs.values())

    spin_until(client, subscribed, 90)
    yield {"node": client, "proc": node_proc, "clips": clips, "pubs": pubs}
    client.destroy_node()
    rclpy.try_shutdown()
    if node_proc.poll() is None:
        node_proc.kill()
        node_proc.wait()


def publish_pose(system, t: float, x: float, y: float, yaw: float, frame: str = "map") -> None:
    msg = PoseWithCovarianceStamped()
    msg.header.stamp, msg.header.frame_id = stamp(t), frame
    msg.pose.pose.position.x, msg.pose.pose.position.y = x, y
    msg.pose.pose.orientation.z, msg.pose.pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
    system["pubs"]["pose"].publish(msg)


def publish_voice(system, t0: float, t1: float, voice_id: str, text: str) -> None:
    msg = VoiceSegment(segment_id=int(t0 * 10), voice_id=voice_id, start=stamp(t0), end=stamp(t1), transcript=text,
                       asr_confidence=0.9, language="en", embedding=[0.6, 0.8], embedding_model="test")  # fmt: skip
    msg.header.stamp = stamp(t1)
    system["pubs"]["voices"].publish(msg)


def test_memories_get_the_place_of_the_pose_topic_and_searches_filter_by_it(system):
    node = system["node"]
    # The publisher seeing the node's subscription does not mean the node's reader has matched it yet, and a
    # best-effort pose sent before that is lost: warm up for 2 s with poses at clip 0's start (before 100 s).
    for i in range(20):
        publish_pose(system, 90.0 + i * 0.5, 1.0, 2.0, 0.0)
        time.sleep(0.1)
    for i in range(21):  # clip 0 (100..110 s): walking east through the kitchen at y = 2
        publish_pose(system, 100.0 + i * 0.5, 1.0 + i * 0.1, 2.0, 0.0)
        publish_pose(system, 100.0 + i * 0.5 + 0.25, 50.0, 50.0, 0.0, frame="odom")  # another frame: dropped
        time.sleep(0.01)  # a pose topic streams; it does not arrive in one burst
    time.sleep(0.5)  # poses and utterances are different topics: DDS does not order them
    publish_voice(system, 102.0, 104.0, "voice_1", "the scissors are in the top drawer")
    publish_voice(system, 113.0, 115.0, "voice_2", "the tomatoes need water every evening")
    publish_voice(system, 125.0, 126.0, "voice_2", "good night")  # later evidence closes clip 1 ...
    time.sleep(1.0)  # ... before its poses came (a busy node; DDS orders nothing across topics): it waits for them
    for i in range(21):  # clip 1 (110..120 s): standing in the garden, facing north
        publish_pose(system, 110.0 + i * 0.5, 20.0, 11.0, math.pi / 2)
        time.sleep(0.01)
    spin_until(node, lambda: {c.clip_index for c in system["clips"]} >= {0, 1}, 60)

    by_text = {m.text: m for clip in system["clips"] for m in clip.episodic}
    scissors = next(m for text, m in by_text.items() if "scissors" in text)
    assert scissors.place.known and scissors.place.frame_id == "map" and scissors.place.region == "kitchen"
    assert math.isclose(scissors.place.x, 1.6, abs_tol=0.06) and math.isclose(scissors.place.y, 2.0)
    tomatoes = next(m for text, m in by_text.items() if "tomatoes" in text)
    assert tomatoes.place.region == "garden" and math.isclose(tomatoes.place.yaw, math.pi / 2, abs_tol=1e-6)

    def search(**fields) -> SearchNode.Response:
        request = SearchNode.Request(query="what did someone say", kinds=["episodic"], top_k=10)
        for name, value in fields.items():
            setattr(request, name, value)
        return call(node, SearchNode, "/m3/memory/search_node", request)

    in_garden = search(place=PlaceFilter(region="garden"))
    assert in_garden.error_code == 0 and [i.text for i in in_garden.items] == [tomatoes.text]
    near = search(place=PlaceFilter(x=1.5, y=2.0, radius_m=0.5))
    assert [i.text for i in near.items] == [scissors.text]
    later = search(after_stamp=stamp(110.0))
    assert later.error_code == 0 and scissors.text not in [i.text for i in later.items]
    assert tomatoes.text in [i.text for i in later.items]
    unknown = search(place=PlaceFilter(region="attic"))
    assert unknown.error_code == SearchNode.Response.INVALID_ARGUMENT and "'kitchen', 'garden'" in unknown.error_message
    bad = search(after_stamp=Time(sec=1, nanosec=2_000_000_000))
    assert bad.error_code == SearchNode.Response.INVALID_ARGUMENT and "after_stamp" in bad.error_message

    clip_request = SearchClip.Request(query="drawer tomatoes", top_k=5, threshold=-1.0)
    clip_request.place = PlaceFilter(region="kitchen")
    clips = call(node, SearchClip, "/m3/memory/search_clip", clip_request)
    assert clips.error_code == 0 and [c.clip_index for c in clips.clips] == [0]
