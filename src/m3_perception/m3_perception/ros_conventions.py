"""The perception node's ROS-convention adapters, made in one place: audio_common microphone input
(audio_input 'audio_common'), REP-155 identity output (publish_hri) and vision_msgs object detections
(publish_vision_msgs). The message packages are optional (optional_interfaces); the conversion logic is
in audio_common_input, hri_ids and detection_array here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Header

from m3_interfaces.msg import ObjectTracks
from m3_perception.audio_common_input import AudioCommonStream, StreamFormat
from m3_runtime.audio_codec import AudioLimits
from m3_runtime.hri_ids import RecentVoices, valid_id
from m3_runtime.optional_interfaces import hri_messages, import_messages, vision_messages

AUDIO_INPUTS = ("m3", "audio_common")
DETECTIONS_TOPIC = "m3/objects/detections"
WARN_THROTTLE_S = 5.0
# Latched state topics: a late subscriber gets the current list at once.
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)

# accept(header, decode): the node's audio intake (stamp check, decode, drop with a warning, submit).
Accept = Callable[[Header, Callable[[], np.ndarray]], None]


class AudioCommonInput:
    """Subscribes the driver's AudioInfo (latched, as the driver publishes it) and AudioDataStamped."""

    def __init__(self, node: Node, topic: str, info_topic: str, limits: AudioLimits, qos: QoSProfile, accept: Accept):
        data_type, info_type = import_messages(
            "audio_common_msgs", ("AudioDataStamped", "AudioInfo"), "audio_input 'audio_common'"
        )
        self.node = node
        self.topic = topic
        self.accept = accept
        self.stream = AudioCommonStream(info_topic, limits)
        self._subscriptions = ((info_type, info_topic, self._on_info, LATCHED), (data_type, topic, self._on_data, qos))

    def go_live(self):
        """Subscribe (on activate; the managed node destroys them on deactivate); the data subscription."""
        _info, data = (self.node.live(self.node.create_subscription(*args)) for args in self._subscriptions)
        return data

    def _on_info(self, msg) -> None:
        fmt = StreamFormat(int(msg.sample_rate), int(msg.channels), msg.sample_format, msg.coding_format)
        changed = self.stream.set_info(fmt)
        if self.stream.problem:
            self.node.get_logger().warning(self.stream.problem, throttle_duration_sec=WARN_THROTTLE_S)
        elif changed:
            self.node.get_logger().info(f"audio_common stream on {self.stream.info_topic}: {fmt.describe()}")

    def _on_data(self, msg) -> None:
        self.accept(msg.header, lambda: self.stream.decode(msg.audio.data))


class HriPerceptionOutput:
    """REP-155: /humans/faces/tracked, /humans/voices/tracked (IdsList) and /humans/candidate_matches
    (IdsMatch, face <-> voice, what /m3/entity_matches carries)."""

    def __init__(self, node: Node, messages: tuple[type, type], voice_window_s: float, match_depth: int) -> None:
        self.ids_list, self.ids_match = messages
        self.pub_faces = node.lifecycle_publisher(self.ids_list, "/humans/faces/tracked", LATCHED)
        self.pub_voices = node.lifecycle_publisher(self.ids_list, "/humans/voices/tracked", LATCHED)
        self.pub_matches = node.lifecycle_publisher(
            self.ids_match, "/humans/candidate_matches", QoSProfile(depth=match_depth)
        )
        self.voices = RecentVoices(voice_window_s)
        self._voices_lock = threading.Lock()  # utterances arrive on the voice worker, time on the node's timer

    def _ids(self, stamp: Time, ids: list[str]):
        unique = [i for k, i in enumerate(ids) if i and valid_id(i) and i not in ids[:k]]
        return self.ids_list(header=Header(stamp=stamp), ids=unique)

    def faces(self, stamp: Time, face_ids: list[str]) -> None:
        self.pub_faces.publish(self._ids(stamp, face_ids))

    def voice(self, stamp: Time, voice_id: str, end_s: float) -> None:
        with self._voices_lock:
            self.voices.heard(voice_id, end_s)
            self.pub_voices.publish(self._ids(stamp, self.voices.ids()))

    def advance(self, stamp: Time, now_s: float) -> None:
        with self._voices_lock:
            if self.voices.advance(now_s):
                self.pub_voices.publish(self._ids(stamp, self.voices.ids()))

    def match(self, face_id: str, voice_id: str, confidence: float) -> None:
        if valid_id(face_id) and valid_id(voice_id):
            m = self.ids_match(id1=face_id, id2=voice_id, confidence=float(confidence))
            m.id1_type, m.id2_type = self.ids_match.FACE, self.ids_match.VOICE
            self.pub_matches.publish(m)


def detection_array(tracks: ObjectTracks, messages: tuple[type, ...]):
    """vision_msgs/Detection2DArray of an ObjectTracks: one Detection2D per object (id: its object id, bbox
    centre and size in pixels, one hypothesis: label and confidence); the pose is left unset (unknown)."""
    array_type, detection_type, hypothesis_type = messages
    out = array_type(header=tracks.header)
    for o in tracks.objects:
        detection = detection_type(header=tracks.header, id=o.object_id)
        detection.bbox.center.position.x = float(o.x + o.width / 2)
        detection.bbox.center.position.y = float(o.y + o.height / 2)
        detection.bbox.size_x, detection.bbox.size_y = float(o.width), float(o.height)
        result = hypothesis_type()
        result.hypothesis.class_id, result.hypothesis.score = o.label, float(o.confidence)
        detection.results.append(result)
        out.detections.append(detection)
    return out


class VisionDetectionsOutput:
    """m3/objects/detections (vision_msgs/Detection2DArray): what m3/objects carries, for the tools that
    read vision_msgs (rviz plugins, trackers, nav stacks), without crops and first/last seen."""

    def __init__(self, node: Node, messages: tuple[type, ...], qos: QoSProfile) -> None:
        self.messages = messages
        self.pub = node.lifecycle_publisher(messages[0], DETECTIONS_TOPIC, qos)

    def objects(self, tracks: ObjectTracks) -> None:
        self.pub.publish(detection_array(tracks, self.messages))


class PerceptionConventions:
    """What the perception node adds for ROS conventions; every method is a no-op when its part is off."""

    def __init__(self, node: Node, params: dict, limits: AudioLimits, audio_qos: QoSProfile, accept: Accept):
        if params["audio_input"] not in AUDIO_INPUTS:
            raise ValueError(f"audio_input must be one of {list(AUDIO_INPUTS)}, got {params['audio_input']!r}")
        self.audio_common = None
        if params["audio_input"] == "audio_common":
            self.audio_common = AudioCommonInput(
                node, params["audio_common_topic"], params["audio_common_info_topic"], limits, audio_qos, accept
            )
        messages = hri_messages(params["publish_hri"])
        self.hri = HriPerceptionOutput(node, messages, params["hri_voice_window_s"], 100) if messages else None
        vision = vision_messages(params["publish_vision_msgs"])  # checked even with objects off: fails at once
        on = vision is not None and params["object_backend"] != "none"
        self.vision = VisionDetectionsOutput(node, vision, QoSProfile(depth=100)) if on else None

    def go_live(self):
        """The audio_common subscriptions, when that is the microphone input (on activate): the one of the
        audio data, else None."""
        return self.audio_common.go_live() if self.audio_common else None

    def describe(self, audio_topic: str) -> str:
        """The microphone input and whether REP-155 output is on, for the node's start-up line."""
        audio = f"audio (AudioChunk) {audio_topic}"
        if self.audio_common:
            audio = f"audio (audio_common) {self.audio_common.topic}, format from {self.audio_common.stream.info_topic}"
        vision = f", {DETECTIONS_TOPIC} (vision_msgs) on" if self.vision else ""
        return f"{audio}, REP-155 output {'on' if self.hri else 'off'}{vision}"

    def faces(self, stamp: Time, face_ids: list[str]) -> None:
        if self.hri:
            self.hri.faces(stamp, face_ids)

    def voice(self, stamp: Time, voice_id: str, end_s: float) -> None:
        if self.hri:
            self.hri.voice(stamp, voice_id, end_s)

    def advance(self, stamp: Time, now_s: float) -> None:
        if self.hri:
            self.hri.advance(stamp, now_s)

    def match(self, face_id: str, voice_id: str, confidence: float) -> None:
        if self.hri:
            self.hri.match(face_id, voice_id, confidence)

    def objects(self, tracks: ObjectTracks) -> None:
        if self.vision:
            self.vision.objects(tracks)
