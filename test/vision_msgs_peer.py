"""The far side of test_ros_conventions_dds.py's vision_msgs test, run in a process whose environment has
the fixture vision_msgs (ros_conventions_env.fixture_env): a perception node with objects on (speech off)
is sent a real photograph (scikit-image's chelsea: a cat) as JPEG frames; m3/objects and
m3/objects/detections are recorded and written as JSON to argv[1].
"""

from __future__ import annotations

import json
import sys
import time

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray

from m3_interfaces.msg import ObjectTracks
from m3_perception.material.text_scenes import render_scene
from m3_perception.perception_node import PerceptionNode, to_sec, to_time
from m3_runtime.image_codec import encode_jpeg
from m3_runtime.managed_node import bring_up
from m3_runtime.node_shutdown import spinning

SIZE = (640, 426)  # chelsea's own aspect
T0 = 3000.0


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not pred():
        time.sleep(0.1)
    return pred()


class Peer(Node):
    def __init__(self) -> None:
        super().__init__("vision_msgs_peer")
        self.jpeg = self.create_publisher(CompressedImage, "/vision_test/camera/compressed", 10)
        self.tracks: list[ObjectTracks] = []
        self.detections: list[Detection2DArray] = []
        self.create_subscription(ObjectTracks, "/m3/objects", self.tracks.append, 100)
        self.create_subscription(Detection2DArray, "/m3/objects/detections", self.detections.append, 100)


def track(o) -> list:
    return [o.object_id, o.label, o.confidence, o.x, o.y, o.width, o.height]


def detection(d) -> list:
    box = d.bbox
    first = d.results[0].hypothesis
    centre = box.center.position
    stamp = to_sec(d.header.stamp)
    return [d.id, first.class_id, first.score, centre.x, centre.y, box.size_x, box.size_y, len(d.results), stamp]


def main(out: str) -> None:
    rclpy.init()
    params = [
        Parameter("asr_backend", value="none"),
        Parameter("turn_split", value=False),
        Parameter("image_topic", value="/vision_test/camera"),
        Parameter("image_transport", value="compressed"),
        Parameter("sensor_reliability", value="reliable"),
        Parameter("object_backend", value="yolov3_tiny"),
        Parameter("publish_vision_msgs", value="enabled"),
    ]
    node = bring_up(PerceptionNode(parameter_overrides=params))
    peer = Peer()
    cat = encode_jpeg(render_scene("chelsea", [], size=SIZE).frame, 90)
    with spinning(node, peer):
        discovered = (peer.jpeg.get_subscription_count, node.conventions.vision.pub.get_subscription_count)
        assert wait_for(lambda: all(count() > 0 for count in discovered), 20.0), "DDS discovery did not complete"
        for k in range(4):
            header = Header(stamp=to_time(T0 + 0.5 * k), frame_id="head_camera")
            peer.jpeg.publish(CompressedImage(header=header, format="jpeg", data=cat))
            time.sleep(0.5)
        assert wait_for(lambda: node.seeing.idle() and len(peer.detections) == len(peer.tracks) > 0, 30.0)
        time.sleep(0.5)
        seen = {
            "tracks": [[to_sec(m.header.stamp), m.header.frame_id, [track(o) for o in m.objects]] for m in peer.tracks],
            "detections": [
                [to_sec(m.header.stamp), m.header.frame_id, [detection(d) for d in m.detections]]
                for m in peer.detections
            ],
        }
    with open(out, "w") as handle:
        json.dump(seen, handle)
    rclpy.try_shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
