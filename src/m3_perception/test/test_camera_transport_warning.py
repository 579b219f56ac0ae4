"""Issue 21, D7: a perception node left at image_transport 'raw' while the camera (or `m3 play` of a
video2bag recording) publishes CompressedImage on <image_topic>/compressed got no frame and said nothing:
a memory with no faces. Now it warns once, naming the parameter to set. Real nodes over DDS; the warning
is read from /rosout, where every node's log goes.

Run with its own domain:  ROS_DOMAIN_ID=24 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST python -m pytest ...
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import rclpy
from rcl_interfaces.msg import Log
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from m3_perception.camera_watch import SILENCE_S
from m3_perception.perception_node import PerceptionNode, to_time
from m3_runtime.image_codec import encode_jpeg, encode_raw_rgb8
from m3_runtime.managed_node import bring_up
from m3_runtime.node_shutdown import spinning

pytestmark = pytest.mark.reliability
WARNING = "no camera frame on"
# No speech models; objects and text off too (not what is tested here, and they cost CPU).
LIGHT = [
    Parameter("asr_backend", value="none"),
    Parameter("turn_split", value=False),
    Parameter("object_backend", value="none"),
    Parameter("text_backend", value="none"),
]


class Camera(Node):
    """Publishes frames on the raw and/or compressed topic and collects the perception node's log from /rosout."""

    def __init__(self, base: str, perception: str) -> None:
        super().__init__("d7_camera" + base.replace("/", "_"))
        self.base = base
        self.perception = perception
        self.raw = self.create_publisher(Image, base, 10)
        self.compressed = self.create_publisher(CompressedImage, base + "/compressed", 10)
        self.log: list[str] = []
        rosout = QoSProfile(
            depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        self.create_subscription(Log, "/rosout", self._on_log, rosout)
        self.frame = np.full((120, 160, 3), 128, np.uint8)

    def _on_log(self, message: Log) -> None:
        # /rosout is transient local: an earlier test's node's lines arrive too; keep this camera's.
        if message.name == self.perception and f"{WARNING} {self.base}" in message.msg:
            self.log.append(message.msg)

    def publish(self, t: float, raw: bool, compressed: bool) -> None:
        header = Header(stamp=to_time(t), frame_id="cam")
        if compressed:
            self.compressed.publish(CompressedImage(header=header, format="jpeg", data=encode_jpeg(self.frame, 80)))
        if raw:
            encoding, width, height, step, data = encode_raw_rgb8(self.frame)
            self.raw.publish(Image(header=header, encoding=encoding, width=width, height=height, step=step, data=data))


@pytest.fixture(scope="module")
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


WARNED_WITHIN_S = SILENCE_S + 60.0  # a loaded machine delays the watch's timer and /rosout: wait for it
REPEAT_S = 3.0  # after the first warning, frames go on this long: a second warning would show


def _run(base: str, transport: str, raw: bool, compressed: bool, seconds: float, until_warned=False) -> list[str]:
    """A perception node on `base` with `transport`, a camera publishing what is asked for `seconds` (or,
    `until_warned`, until REPEAT_S after the first warning, at most WARNED_WITHIN_S)."""
    overrides = [*LIGHT, Parameter("image_topic", value=base), Parameter("image_transport", value=transport)]
    # A name of its own: rclpy's /rosout publisher is per node name, and when another 'perception_node' of
    # this process (an earlier test's, collected late) is destroyed it takes that publisher with it - this
    # node's warning was logged but never reached /rosout (CI, stop 31).
    name = "perception" + base.replace("/", "_")
    node = bring_up(PerceptionNode(parameter_overrides=overrides, cli_args=["--ros-args", "-r", f"__node:={name}"]))
    camera = Camera(base, name)
    with spinning(node, camera):  # an executor of its own, stopped before the nodes go
        end, t = time.monotonic() + (WARNED_WITHIN_S if until_warned else seconds), 1000.0
        while time.monotonic() < end:
            if until_warned and camera.log:
                end = min(end, time.monotonic() + REPEAT_S)
                until_warned = False
            camera.publish(t, raw, compressed)
            t += 0.2
            time.sleep(0.2)
        time.sleep(0.5)  # the last log line reaches /rosout
        return list(camera.log)


def test_raw_node_warns_once_when_only_compressed_frames_come(ros):
    seen = _run("/d7a/image_raw", "raw", raw=False, compressed=True, seconds=0.0, until_warned=True)
    assert len(seen) == 1, seen
    assert "no camera frame on /d7a/image_raw (raw)" in seen[0]
    assert "/d7a/image_raw/compressed publishes sensor_msgs/msg/CompressedImage" in seen[0]
    assert "set image_transport to 'compressed'" in seen[0]


def test_no_warning_while_frames_arrive(ros):
    """Frames on the configured topic: no warning, even though the other transport publishes too."""
    assert _run("/d7c/image_raw", "raw", raw=True, compressed=True, seconds=SILENCE_S + 3) == []


def test_compressed_node_warns_once_when_only_raw_frames_come(ros):
    """The other way round: a node set to 'compressed' while the camera publishes raw Image only."""
    seen = _run("/d7b/image_raw", "compressed", raw=True, compressed=False, seconds=0.0, until_warned=True)
    assert len(seen) == 1, seen
    assert "no camera frame on /d7b/image_raw/compressed (compressed)" in seen[0]
    assert "/d7b/image_raw publishes sensor_msgs/msg/Image" in seen[0]
    assert "set image_transport to 'raw'" in seen[0]
