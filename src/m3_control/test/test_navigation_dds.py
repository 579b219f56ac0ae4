"""Plans that go there, over real DDS: a memory node following a pose topic with a regions file, the control
node (embedded extractive back-end) with the same regions file, the Instruct action from here. navigate_to
steps carry the pose of a named region, of where a person was last seen (locate_entity), or of where the
robot was when a remembered event happened."""

from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest
import rclpy
from builtin_interfaces.msg import Time
from dds_goals import instruct, spin_until
from fixtures import stop
from geometry_msgs.msg import PoseStamped
from rclpy.action import ActionClient
from rclpy.node import Node

from m3_interfaces.action import Instruct
from m3_interfaces.msg import ClipMemory, EntityMatch, FaceObservation, FaceTracks, VoiceSegment
from m3_interfaces.srv import LocateEntity

REGIONS = """
frame_id: map
regions:
  kitchen: {polygon: [[0, 0], [5, 0], [5, 4], [0, 4]]}
  front hall: {circle: {center: [20, 10], radius: 3}}
"""


def stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    work = tmp_path_factory.mktemp("navigation")
    (work / "regions.yaml").write_text(REGIONS)
    regions = f"regions_file:={work / 'regions.yaml'}"
    memory = subprocess.Popen(
        [sys.executable, "-m", "m3_memory.memory_node", "--ros-args", "-p", f"memory_dir:={work / 'memory'}",
         "-p", "clip_seconds:=10.0", "-p", "clip_close_delay:=1.0", "-p", "pose_topic:=/robot_pose",
         "-p", "pose_type:=pose_stamped", "-p", regions],
    )  # fmt: skip
    control = subprocess.Popen([sys.executable, "-m", "m3_control.control_node", "--ros-args", "-p", regions])
    rclpy.init()
    node = Node("navigation_test")
    clips: list[ClipMemory] = []
    node.create_subscription(ClipMemory, "/m3/memory/clips", clips.append, 10)
    pubs = {
        "pose": node.create_publisher(PoseStamped, "/robot_pose", 100),
        "faces": node.create_publisher(FaceTracks, "/m3/faces", 100),
        "voices": node.create_publisher(VoiceSegment, "/m3/voices", 100),
        "matches": node.create_publisher(EntityMatch, "/m3/entity_matches", 100),
    }
    client = ActionClient(node, Instruct, "/m3/instruct")
    spin_until(node, lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 90)
    assert client.wait_for_server(timeout_sec=60.0), "control node did not come up"
    yield {"node": node, "pubs": pubs, "clips": clips, "client": client}
    node.destroy_node()
    rclpy.try_shutdown()
    for process in (control, memory):
        stop(process)


def walk(system, t0: float, t1: float, x0: float, x1: float, y: float) -> None:
    for i in range(21):
        msg = PoseStamped()
        msg.header.stamp, msg.header.frame_id = stamp(t0 + (t1 - t0) * i / 20), "map"
        msg.pose.position.x, msg.pose.position.y = x0 + (x1 - x0) * i / 20, y
        msg.pose.orientation.w = 1.0
        system["pubs"]["pose"].publish(msg)
        time.sleep(0.01)
    time.sleep(0.5)  # poses and evidence are different topics: DDS does not order them


def voice(system, t0: float, t1: float, voice_id: str, text: str) -> None:
    msg = VoiceSegment(segment_id=int(t0 * 10), voice_id=voice_id, start=stamp(t0), end=stamp(t1), transcript=text,
                       asr_confidence=0.9, language="en", embedding=[0.6, 0.8], embedding_model="test")  # fmt: skip
    msg.header.stamp = stamp(t1)
    system["pubs"]["voices"].publish(msg)


def face(system, t: float, face_id: str, seed: int) -> None:
    msg = FaceTracks(image_width=512, image_height=512)
    msg.header.stamp = stamp(t)
    vector = [math.sin(seed * (i + 1)) for i in range(128)]
    observation = FaceObservation(face_id=face_id, track_id=seed, width=90.0, height=90.0, score=0.95, quality=0.8)
    observation.embedding, observation.embedding_model = vector, "dlib_resnet_v1"
    msg.faces = [observation]
    system["pubs"]["faces"].publish(msg)


def send(system, instruction: str) -> Instruct.Result:
    return instruct(system["node"], system["client"], Instruct.Goal(instruction=instruction), timeout_s=60.0)


def test_navigate_to_steps_carry_poses_from_regions_people_and_events(system):
    walk(system, 100.0, 110.0, 1.0, 3.0, 2.0)  # clip 0: through the kitchen
    voice(system, 101.0, 102.0, "voice_1", "hi, my name is Carol")
    voice(system, 104.0, 106.0, "voice_1", "I left my phone on the windowsill")
    walk(system, 110.0, 120.0, 20.0, 20.0, 11.0)  # clip 1: standing in the front hall
    face(system, 112.0, "face_2", 2)
    voice(system, 113.0, 115.0, "voice_2", "hi, my name is Bob")
    match = EntityMatch(id1="face_2", id2="voice_2", id1_type=2, id2_type=4, confidence=0.9, evidence_count=3)
    match.header.stamp = stamp(115.0)
    system["pubs"]["matches"].publish(match)
    # Evidence on different topics is not ordered (the node's executor takes ready topics in any order): the
    # line that closes clip 1 goes once the face, line and match above had time to arrive (CI saw the closing
    # line first, and clip 1 stored without Bob's face).
    time.sleep(1.0)
    voice(system, 125.0, 126.0, "voice_2", "good night")  # later evidence closes clip 1
    spin_until(system["node"], lambda: {c.clip_index for c in system["clips"]} >= {0, 1})

    bob = LocateEntity.Request(name="Bob", max_sightings=5)
    located = rclpy_call(system["node"], bob)
    assert located.error_code == 0 and located.name == "Bob"
    seen = [s for s in located.sightings if s.how == "seen"]
    assert seen and seen[0].place.region == "front hall" and seen[0].last == stamp(112.0)

    kitchen = send(system, "Go to the kitchen")
    assert kitchen.error_code == 0, kitchen.error_message
    (step,) = kitchen.plan
    assert (step.skill, step.target_pose.header.frame_id) == ("navigate_to", "map")
    assert (step.target_pose.pose.position.x, step.target_pose.pose.position.y) == (2.5, 2.0)
    assert "region 'kitchen'" in step.target_source and step.target_evidence_id == ""

    to_bob = send(system, "Take me to Bob")
    assert to_bob.error_code == 0, to_bob.error_message
    (step,) = to_bob.plan
    assert (step.target_pose.pose.position.x, step.target_pose.pose.position.y) == (20.0, 11.0)
    assert step.target_evidence_id == located.entity_id and "Bob" in step.target_source

    phone = send(system, "Take me to where Carol left her phone")
    assert phone.error_code == 0, phone.error_message
    (step,) = phone.plan
    assert step.target_pose.header.frame_id == "map" and step.target_evidence_id.startswith("episodic_")
    assert math.isclose(step.target_pose.pose.position.x, 1.0 + 2.0 * 5 / 10, abs_tol=0.11)  # said at 104-106 s
    assert step.target_evidence_id in phone.evidence_ids or phone.evidence_ids

    nowhere = send(system, "Go to the attic")  # named nowhere: the robot must resolve it itself
    assert [s.target_pose.header.frame_id for s in nowhere.plan] == [""]


def rclpy_call(node: Node, request: LocateEntity.Request) -> LocateEntity.Response:
    client = node.create_client(LocateEntity, "/m3/memory/locate_entity")
    assert client.wait_for_service(timeout_sec=30.0)
    future = client.call_async(request)
    spin_until(node, future.done)
    node.destroy_client(client)
    return future.result()
