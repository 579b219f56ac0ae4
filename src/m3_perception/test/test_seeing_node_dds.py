"""Objects and written text from the perception node over real DDS (issue 23, parts 1 and 2): real
package photos (scikit-image's chelsea: a cat; coffee: a cup) with a note pasted in, sent as
CompressedImage; the node's m3/objects and m3/texts are recorded. Speech is off to keep it light.

Run with its own domain:  ROS_DOMAIN_ID=63 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST python -m pytest ...
"""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest
import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from m3_interfaces.msg import FaceTracks, ObjectTracks, TextRegions
from m3_perception.material.text_scenes import Note, render_scene
from m3_perception.model_files import ModelFileMissing
from m3_perception.perception_node import PerceptionNode, to_sec, to_time
from m3_runtime.image_codec import encode_jpeg, encode_raw_rgb8
from m3_runtime.managed_node import bring_up
from m3_runtime.node_shutdown import spinning

LIGHT = [Parameter("asr_backend", value="none"), Parameter("turn_split", value=False)]  # no speech models
CAT_NOTE = Note(("Feed the cat at 6",), 20, 366, 20, 5.0)
CUP_NOTE = Note(("Meeting at 3 pm",), 30, 40, 24, 7.0)
SIZE = (640, 426)  # chelsea's own aspect: YOLOv3-tiny finds the cat at 0.66 (0.47 squeezed into 640x480)
T0 = 2000.0


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


class Camera(Node):
    """Publishes frames on <base> (raw) and <base>/compressed; records m3/objects, m3/texts, m3/faces."""

    def __init__(self, name: str, base: str, prefix: str) -> None:
        super().__init__(name)
        self.raw = self.create_publisher(Image, base, 10)
        self.jpeg = self.create_publisher(CompressedImage, base + "/compressed", 10)
        self.objects: list[ObjectTracks] = []
        self.texts: list[TextRegions] = []
        self.faces: list[FaceTracks] = []
        self.create_subscription(ObjectTracks, prefix + "/m3/objects", self.objects.append, 100)
        self.create_subscription(TextRegions, prefix + "/m3/texts", self.texts.append, 100)
        self.create_subscription(FaceTracks, prefix + "/m3/faces", self.faces.append, 100)

    def send(self, t: float, rgb: np.ndarray, compressed: bool) -> None:
        header = Header(stamp=to_time(t), frame_id="cam")
        if compressed:
            self.jpeg.publish(CompressedImage(header=header, format="jpeg", data=encode_jpeg(rgb, 90)))
        else:
            encoding, width, height, step, data = encode_raw_rgb8(rgb)
            self.raw.publish(Image(header=header, encoding=encoding, width=width, height=height, step=step, data=data))


def _node(name: str, prefix: str, *overrides: Parameter) -> PerceptionNode:
    """A perception node with a name and topics of its own (rclpy's /rosout publisher is per node name)."""
    remaps = [f"/m3/{t}:={prefix}/m3/{t}" for t in ("objects", "texts", "faces")]
    args = ["--ros-args", "-r", f"__node:={name}", *[a for r in remaps for a in ("-r", r)]]
    params = [
        *LIGHT,
        Parameter("image_topic", value=prefix + "/camera"),
        Parameter("sensor_reliability", value="reliable"),
        Parameter("object_backend", value="yolov3_tiny"),  # both off by default until memory stores them
        Parameter("text_backend", value="rapidocr"),
    ]
    return PerceptionNode(parameter_overrides=[*params, *overrides], cli_args=args)


@pytest.fixture(scope="module")
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.fixture(scope="module")
def seen(ros):
    """Cat scene for 3 s of stream time, then the cup scene for 3 s, at 2 frames/s, as JPEG."""
    node = bring_up(_node("seeing_dds", "/seeing", Parameter("image_transport", value="compressed")))
    cam = Camera("seeing_dds_camera", "/seeing/camera", "/seeing")
    cat = render_scene("chelsea", [CAT_NOTE], size=SIZE).frame
    cup = render_scene("coffee", [CUP_NOTE], size=SIZE).frame
    with spinning(node, cam):
        assert wait_for(
            lambda: cam.jpeg.get_subscription_count() > 0 and node.pub_objects.get_subscription_count() > 0, 20.0
        ), "DDS discovery did not complete"
        for k in range(12):
            cam.send(T0 + 0.5 * k, cat if k < 6 else cup, compressed=True)
            time.sleep(0.5)  # about the cost of a detection plus a read on 2 loaded cores
        assert wait_for(lambda: node.seeing.idle() and node.engine.idle(), 30.0)
        time.sleep(0.5)
        yield node, cam


def test_cat_tracked_with_a_stable_id_and_a_crop_once(seen) -> None:
    node, cam = seen
    assert cam.objects, "no ObjectTracks published"
    assert all(
        m.image_width == SIZE[0] and m.image_height == SIZE[1] and m.header.frame_id == "cam" for m in cam.objects
    )
    cats = [(to_sec(m.header.stamp), o) for m in cam.objects for o in m.objects if o.label == "cat"]
    assert len(cats) >= 2, [[(o.label, o.confidence) for o in m.objects] for m in cam.objects]
    assert len({o.object_id for _, o in cats}) == 1, [o.object_id for _, o in cats]
    first = cats[0][1]
    crop = cv2.imdecode(np.frombuffer(bytes(first.crop_jpeg), np.uint8), cv2.IMREAD_COLOR)
    assert crop is not None and crop.shape[0] == round(first.height) and crop.shape[1] == round(first.width)
    assert first.confidence >= 0.25 and first.width > SIZE[0] / 2
    assert to_sec(first.first_seen) == cats[0][0] and all(to_sec(o.last_seen) == t for t, o in cats)
    best = first.confidence
    for _, o in cats[1:]:  # a crop again only with a more confident sighting (the same photo: never)
        assert bool(o.crop_jpeg) == (o.confidence > best), (o.confidence, best, len(o.crop_jpeg))
        best = max(best, o.confidence)
    stats = node.seeing.stats
    assert stats.frames_processed + stats.frames_dropped == 12 and len(cam.objects) == stats.frames_processed


def test_note_read_as_text_regions(seen) -> None:
    _, cam = seen
    texts = [(to_sec(m.header.stamp), r) for m in cam.texts for r in m.regions]
    cat_note = [r for t, r in texts if t < T0 + 3.0]
    cup_note = [r for t, r in texts if t >= T0 + 3.0]
    assert cat_note and cat_note[0].text == CAT_NOTE.text and cat_note[0].is_new, [r.text for _, r in texts]
    assert cat_note[0].confidence >= 0.8 and cat_note[0].region_id.startswith("text_")
    assert 0 <= cat_note[0].x < CAT_NOTE.x + 40 and cat_note[0].y > SIZE[1] / 2  # where the note is
    assert [r.text for r in cup_note] and cup_note[0].text == CUP_NOTE.text, [r.text for r in cup_note]
    assert cup_note[0].region_id != cat_note[0].region_id
    # Read on keyframes only: the first frame, the changed view, and at most one 5 s interval.
    assert 2 <= len(cam.texts) <= 4, [to_sec(m.header.stamp) for m in cam.texts]


def test_objects_and_text_off_publish_nothing_and_load_nothing(ros) -> None:
    off = [Parameter("object_backend", value="none"), Parameter("text_backend", value="none")]
    node = bring_up(_node("seeing_off", "/seeing_off", *off))
    cam = Camera("seeing_off_camera", "/seeing_off/camera", "/seeing_off")
    assert node.seeing is None  # no detector, no reader, no worker thread
    frame = render_scene("chelsea", [CAT_NOTE], size=SIZE).frame
    with spinning(node, cam):
        assert wait_for(
            lambda: cam.raw.get_subscription_count() > 0 and node.pub_faces.get_subscription_count() > 0, 20.0
        )
        for k in range(3):
            cam.send(T0 + k, frame, compressed=False)
            time.sleep(0.3)
        assert wait_for(lambda: len(cam.faces) >= 3, 30.0), "the node processed no frame"
        time.sleep(0.5)
    assert cam.objects == [] and cam.texts == []


@pytest.mark.parametrize(
    ("override", "error", "message"),
    [
        (Parameter("object_rate_hz", value=-1.0), ValueError, r"'object_rate_hz' = -1.0 is out of range \[0.1, 60.0\]"),
        (Parameter("object_backend", value="yolo9"), ValueError, r"object_backend must be one of .*got 'yolo9'"),
        (Parameter("text_min_gap_s", value=9.0), ValueError, r"text_min_gap_s \(9.0\) must be in \[0, text_interval_s"),
        (Parameter("object_backend", value="onnx"), ValueError, "the onnx object detector needs model_path"),
    ],
)
def test_bad_values_fail_configure(ros, override, error, message) -> None:
    node = _node("seeing_bad", "/seeing_bad", override)
    with pytest.raises(error, match=message):
        bring_up(node)
    node.destroy_node()


def test_missing_model_fails_configure(ros, tmp_path) -> None:
    missing = [
        Parameter("object_backend", value="onnx"),
        Parameter("object_model_path", value=str(tmp_path / "x.onnx")),
    ]
    node = _node("seeing_missing", "/seeing_missing", *missing)
    with pytest.raises(ModelFileMissing, match=r"ONNX object detector model file not found: .*x\.onnx"):
        bring_up(node)
    node.destroy_node()
