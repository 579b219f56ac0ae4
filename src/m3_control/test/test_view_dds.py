"""'Can you see a cup?' through the Instruct action over real DDS: the control node (its own process,
extractive back-end) follows m3/objects and m3/texts, published here as perception does; memory is the
test peer. Run with a domain of its own, e.g. ROS_DOMAIN_ID=24 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from builtin_interfaces.msg import Time
from dds_goals import instruct, spin_until
from fixtures import stop
from rclpy.action import ActionClient
from rclpy.node import Node

from m3_interfaces.action import Instruct
from m3_interfaces.msg import ObjectTrack, ObjectTracks, TextRegion, TextRegions

HERE = Path(__file__).parent
MAX_AGE_S = 1.5


@pytest.fixture(scope="module")
def system():
    memory = subprocess.Popen([sys.executable, str(HERE / "memory_peer.py")])
    control = subprocess.Popen(
        [sys.executable, "-m", "m3_control.control_node", "--ros-args", "-p", f"view_max_age_s:={MAX_AGE_S}"]
    )
    rclpy.init()
    node = Node("view_test_client")
    client = ActionClient(node, Instruct, "/m3/instruct")
    objects = node.create_publisher(ObjectTracks, "/m3/objects", 10)
    texts = node.create_publisher(TextRegions, "/m3/texts", 10)
    assert client.wait_for_server(timeout_sec=30.0), "control node did not come up"
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    yield {"node": node, "client": client, "objects": objects, "texts": texts}
    node.destroy_node()
    rclpy.try_shutdown()
    for process in (control, memory):
        stop(process)


def ask(system, instruction: str, **fields) -> Instruct.Result:
    return instruct(system["node"], system["client"], Instruct.Goal(instruction=instruction, max_rounds=3, **fields))


def publish_view(system, stamp_s: int) -> None:
    """One processed image as perception publishes it: a cup and a person; a note read on the keyframe."""
    stamp = Time(sec=stamp_s)
    tracks = ObjectTracks(image_width=640, image_height=480)
    tracks.header.stamp = stamp
    for track_id, label, confidence in (("object_1", "cup", 0.7), ("object_2", "person", 0.9)):
        tracks.objects.append(
            ObjectTrack(object_id=track_id, label=label, confidence=confidence, first_seen=Time(sec=1), last_seen=stamp)
        )
    system["objects"].publish(tracks)
    regions = TextRegions(image_width=640, image_height=480)
    regions.header.stamp = stamp
    regions.regions.append(
        TextRegion(region_id="text_1", text="Dentist Tuesday 3 pm", confidence=0.98, last_seen=stamp)
    )
    system["texts"].publish(regions)


def test_in_view_now_through_the_action(system):
    silent = ask(system, "Can you see a cup?")
    assert silent.error_code == Instruct.Result.SUCCEEDED and silent.answered_by == "view"
    assert silent.answer.startswith("I cannot tell what is in view now: no objects have come from perception yet")

    def seen() -> bool:
        publish_view(system, 10)
        return ask(system, "Can you see a cup?").answer.startswith("Yes")

    spin_until(system["node"], seen, timeout_s=20.0)  # the subscription may match a little after the server
    publish_view(system, 11)
    result = ask(system, "Is there a mug in front of you?")
    assert result.answer == "Yes: I see a cup now." and result.answered_by == "view"
    assert result.rounds_used == 0 and list(result.evidence_ids) == [] and list(result.plan) == []
    assert ask(system, "Can you see a dog?").answer == "No: I do not see any dog now. I see a person and a cup."
    assert ask(system, "What do you see?").answer == 'I see a person and a cup. I can read "Dentist Tuesday 3 pm".'
    assert ask(system, "Is the note in view?").answer == 'Yes: I can read "Dentist Tuesday 3 pm".'
    # the past, or an as-of goal, is memory's: the view is not asked
    assert ask(system, "Did you see a cup?").answered_by == ""
    assert ask(system, "Can you see a cup?", before_clip=0).answered_by == ""
    # perception goes silent: after view_max_age_s "now" is unknown, not "no"
    time.sleep(MAX_AGE_S + 0.5)
    stale = ask(system, "Can you see a cup?")
    assert stale.answered_by == "view"
    assert stale.answer.startswith("I cannot tell what is in view now: nothing has come from perception's objects")
