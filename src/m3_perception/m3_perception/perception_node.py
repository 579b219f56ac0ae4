"""ROS 2 adapter of the perception logic: parameters, QoS, message conversions.

Subscribes to a camera (sensor_msgs/Image or CompressedImage) and a microphone (AudioChunk),
publishes FaceTracks, VoiceSegment, EntityMatch, ObjectTracks, TextRegions and latched IdentityList
topics. The work is done by plain modules (engine, seeing, face_pipeline, voice_pipeline) on worker
threads; the messages it publishes are built by messages.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from builtin_interfaces.msg import Time
from rclpy.clock import Clock as RclpyClock
from rclpy.clock import ClockType
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from m3_interfaces.msg import (
    AudioChunk,
    EntityMatch,
    FaceTracks,
    IdentityList,
    IdentityUpdate,
    ObjectTracks,
    TextRegions,
    VoiceSegment,
)
from m3_perception.assembly import build_pipelines, build_seeing
from m3_perception.camera_watch import CHECK_PERIOD_S, CameraWatch, other_transport
from m3_perception.engine import EngineCallbacks, PerceptionEngine
from m3_perception.face_voice_matcher import MatchCandidate
from m3_perception.faces.face_encoder import FaceEncoder
from m3_perception.faces.pipeline import FaceObs
from m3_perception.identity_clusters import IdentityState
from m3_perception.messages import (
    entity_match,
    face_tracks,
    identity_list,
    identity_update,
    object_tracks,
    text_regions,
    to_sec,
    to_time,
    voice_segment,
)
from m3_perception.node_parameters import PARAMETERS
from m3_perception.ros_conventions import PerceptionConventions
from m3_perception.seeing import SeeingWorker, Seen
from m3_perception.voices.pipeline import VoiceEvent
from m3_perception.voices.revision import VoiceUpdate
from m3_runtime.audio_codec import AudioDecodeError, AudioLimits, decode_chunk
from m3_runtime.image_codec import ImageDecodeError, decode_compressed, decode_raw
from m3_runtime.managed_node import ManagedNode, run_node
from m3_runtime.node_shutdown import import_whole
from m3_runtime.parameter_checks import declare_checked
from m3_runtime.stamps import StampGuard, StampRejected, header_ns

NODE_NAME = "perception_node"
WARN_THROTTLE_S = 5.0
OUTPUT_DEPTH = 100  # history of the face / voice / match publishers (a few seconds at replay speed)
__all__ = ["NODE_NAME", "PARAMETERS", "PerceptionNode", "main", "to_sec", "to_time"]


class PerceptionNode(ManagedNode):
    """Managed node (managed_node.py): models load on configure, the camera and microphone go live on activate."""

    def __init__(self, **kwargs) -> None:
        super().__init__(NODE_NAME, **kwargs)
        declare_checked(self, PARAMETERS)  # a bad value or unknown name fails configure, never a traceback
        self.engine: PerceptionEngine | None = None
        self.seeing: SeeingWorker | None = None  # objects and text; None when both are off
        self.bad_frames = 0
        self.bad_chunks = 0
        self.bad_stamps = 0
        self._camera_watch = CameraWatch()  # warns when the camera is silent and the other transport is not
        self._camera_topic = ""

    def configure(self) -> None:
        g = self.get_parameter
        if g("face_backend").value == "dlib":
            import_whole(*FaceEncoder.LIBRARIES)  # a stop while C extensions import is honoured once they are in
        transport = g("image_transport").value
        if transport not in ("raw", "compressed"):
            raise ValueError(f"image_transport must be 'raw' or 'compressed', got {transport!r}")
        chosen = g("sensor_reliability").value
        reliability = {"best_effort": ReliabilityPolicy.BEST_EFFORT, "reliable": ReliabilityPolicy.RELIABLE}.get(chosen)
        if reliability is None:
            raise ValueError(f"sensor_reliability must be 'best_effort' or 'reliable', got {chosen!r}")
        self.reliability = reliability
        self.image_transport = transport
        params = {name: g(name).value for name in PARAMETERS}
        if params["audio_sample_rate_min"] > params["audio_sample_rate_max"]:
            raise ValueError(
                f"audio_sample_rate_min ({params['audio_sample_rate_min']}) must not be above "
                f"audio_sample_rate_max ({params['audio_sample_rate_max']})"
            )
        self.max_image_pixels = params["max_image_pixels"]
        self.audio_limits = AudioLimits(
            params["audio_sample_rate_min"], params["audio_sample_rate_max"], params["max_audio_chunk_s"]
        )
        # One clock per input: a camera and a microphone driver may stamp from different clocks.
        self.image_stamps = StampGuard(params["max_stamp_jump_s"])
        self.audio_stamps = StampGuard(params["max_stamp_jump_s"])
        # Sensor-data QoS (best effort unless sensor_reliability says otherwise) with a deeper history
        # for audio: a chunk lost while the executor is busy is a hole in speech, so 10 s of 0.1 s
        # chunks may wait; a late frame just gets skipped.
        self.audio_qos = QoSProfile(depth=100, reliability=reliability, durability=DurabilityPolicy.VOLATILE)
        # audio_common input and REP-155 output (optional message packages), made in one place and
        # before the models load, so a package asked for but missing fails configure at once.
        self.conventions = PerceptionConventions(self, params, self.audio_limits, self.audio_qos, self._accept_audio)
        seeing = build_seeing(params, self.get_logger())  # objects and text first: a bad value fails before any load
        faces, voices, matcher = build_pipelines(params, self.get_logger())  # loads models; a missing file fails here

        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        # Reliable with a deep history: a subscriber (the memory node) stalled for a few seconds while
        # perception runs faster than real time (keep-up replay) still receives every result.
        outputs = QoSProfile(depth=OUTPUT_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_faces = self.lifecycle_publisher(FaceTracks, "m3/faces", outputs)
        self.pub_voices = self.lifecycle_publisher(VoiceSegment, "m3/voices", outputs)
        self.pub_matches = self.lifecycle_publisher(EntityMatch, "m3/entity_matches", outputs)
        self.pub_face_ids = self.lifecycle_publisher(IdentityList, "m3/identities/faces", latched)
        self.pub_voice_ids = self.lifecycle_publisher(IdentityList, "m3/identities/voices", latched)
        self.pub_voice_updates = self.lifecycle_publisher(IdentityUpdate, "m3/identities/voice_updates", outputs)
        self.pub_objects = self.lifecycle_publisher(ObjectTracks, "m3/objects", outputs)
        self.pub_texts = self.lifecycle_publisher(TextRegions, "m3/texts", outputs)
        # Stream time processed so far: `m3 play --keep-up` paces on it (as fast as perception keeps up).
        self.pub_progress = self.lifecycle_publisher(Clock, "m3/perception/processed_until", 10)
        self._progress_sent = float("-inf")
        self._sensors: tuple = ()  # the camera and microphone subscriptions (go_live)
        self._image_frame = ""
        self._audio_frame = ""

        self.engine = PerceptionEngine(
            faces,
            voices,
            matcher,
            EngineCallbacks(
                self._on_faces, self._on_voice, self._on_match, self._on_identities, self._on_error, self._on_update
            ),
            face_rate_hz=g("face_rate_hz").value,
            max_audio_backlog_s=g("max_audio_backlog_s").value,
            identities_period_s=g("identities_period_s").value,
        )
        self._seeing_text = seeing.describe() if seeing is not None else "objects off, text off"
        if seeing is not None:
            self.seeing = SeeingWorker(seeing, self._on_seen, self._on_error)

    def go_live(self) -> None:
        g = self.get_parameter
        transport = self.image_transport  # checked on configure
        image_topic = g("image_topic").value
        camera_qos = QoSProfile(
            depth=qos_profile_sensor_data.depth, reliability=self.reliability, durability=DurabilityPolicy.VOLATILE
        )
        if transport == "compressed":
            image_topic = image_topic.rstrip("/") + "/compressed"
            camera = self.create_subscription(CompressedImage, image_topic, self._on_compressed, camera_qos)
        else:
            camera = self.create_subscription(Image, image_topic, self._on_image, camera_qos)
        if self.conventions.audio_common:
            microphone = self.conventions.go_live()  # audio_common's AudioInfo + AudioDataStamped, not AudioChunk
        else:
            audio_topic = g("audio_topic").value
            microphone = self.live(self.create_subscription(AudioChunk, audio_topic, self._on_audio, self.audio_qos))
        self._sensors = (self.live(camera), microphone)
        # Wall (steady) time: with use_sim_time a /clock-driven timer would wait for the very player
        # that waits for this progress.
        steady = RclpyClock(clock_type=ClockType.STEADY_TIME)
        self.live(self.create_timer(0.05, self._publish_progress, clock=steady))
        self._camera_topic = image_topic
        self._camera_watch.start(time.monotonic())
        self.live(self.create_timer(CHECK_PERIOD_S, self._check_camera, clock=steady))
        self.get_logger().info(
            f"perception ready: camera {image_topic} ({transport}), "
            f"{self.conventions.describe(g('audio_topic').value)}; {self._seeing_text}"
        )

    def _check_camera(self) -> None:
        """Warn once when the camera topic is silent while the other transport's topic publishes (camera_watch)."""
        if not self._camera_watch.due(time.monotonic()):
            return
        transport = self.image_transport
        other, other_type, other_transport_name = other_transport(self.get_parameter("image_topic").value, transport)
        if any(other_type in info.topic_type for info in self.get_publishers_info_by_topic(other)):
            self.get_logger().warning(
                self._camera_watch.message(self._camera_topic, transport, other, other_type, other_transport_name)
            )

    def _publish_progress(self) -> None:
        # a sensor topic someone publishes on bounds progress before its first message (engine.processed_until)
        expected = tuple(sub.get_publisher_count() > 0 for sub in self._sensors)
        until = self.engine.processed_until(expected)
        if self.seeing is not None:  # a keep-up replay waits for objects and text too: nothing dropped
            until = min(until, self.seeing.processed_until(expected[0]))
        if until > self._progress_sent:
            self._progress_sent = until
            self.pub_progress.publish(Clock(clock=to_time(until)))
            self.conventions.advance(to_time(until), until)

    # -- inputs --------------------------------------------------------------------------------
    def _stamp_ok(self, stamp: Time, guard: StampGuard, what: str) -> bool:
        """Whether a message's stamp is usable stream time; if not it is dropped with a warning."""
        try:
            if guard.admit(header_ns(stamp.sec, stamp.nanosec)) and guard is self.audio_stamps:
                self.engine.flush_voices()  # the stream moved to a new time: no utterance spans the jump
        except StampRejected as e:
            self.bad_stamps += 1
            self.get_logger().warning(
                f"dropped {what} ({self.bad_stamps} bad stamps so far): {e}", throttle_duration_sec=WARN_THROTTLE_S
            )
            return False
        return True

    def _on_image(self, msg: Image) -> None:
        self._on_frame(
            msg.header,
            lambda: decode_raw(msg.encoding, msg.width, msg.height, msg.step, msg.data, self.max_image_pixels),
        )

    def _on_compressed(self, msg: CompressedImage) -> None:
        self._on_frame(msg.header, lambda: decode_compressed(msg.format, msg.data, self.max_image_pixels))

    def _on_frame(self, header: Header, decode: Callable[[], np.ndarray]) -> None:
        """Any camera frame: stamp check, the face and seeing rate limits, then decode once for both."""
        self._camera_watch.frame(time.monotonic())
        stamp = to_sec(header.stamp)
        if not self._stamp_ok(header.stamp, self.image_stamps, "camera frame"):
            return
        faces = self.engine.frame_wanted(stamp)
        seeing = self.seeing is not None and self.seeing.frame_wanted(stamp)
        if not (faces or seeing):
            return
        try:
            rgb = decode()
        except ImageDecodeError as e:
            if faces:
                self.engine.frame_discarded(stamp)
            if seeing:
                self.seeing.discarded(stamp)
            self._bad_frame(e)
            return
        self._image_frame = header.frame_id
        if faces:
            self.engine.submit_frame(stamp, rgb)
        if seeing:
            self.seeing.submit(stamp, rgb)

    def _on_audio(self, msg: AudioChunk) -> None:
        self._accept_audio(
            msg.header,
            lambda: decode_chunk(
                msg.sample_rate, msg.channels, msg.sample_format, msg.data, msg.coding_format, self.audio_limits
            ),
        )

    def _accept_audio(self, header: Header, decode: Callable[[], np.ndarray]) -> None:
        """Any microphone message (AudioChunk, audio_common): stamp check, decode, or drop with a warning."""
        if not self._stamp_ok(header.stamp, self.audio_stamps, "audio chunk"):
            return
        try:
            samples = decode()
        except AudioDecodeError as e:
            self.bad_chunks += 1
            self.get_logger().warning(
                f"dropped audio chunk ({self.bad_chunks} so far): {e}", throttle_duration_sec=WARN_THROTTLE_S
            )
            return
        self._audio_frame = header.frame_id
        self.engine.submit_audio(to_sec(header.stamp), samples)

    def _bad_frame(self, e: Exception) -> None:
        self.bad_frames += 1
        self.get_logger().warning(
            f"dropped camera frame ({self.bad_frames} so far): {e}", throttle_duration_sec=WARN_THROTTLE_S
        )

    # -- outputs (worker threads) ----------------------------------------------------------------
    def _on_faces(self, stamp: float, width: int, height: int, faces: list[FaceObs]) -> None:
        model = self.engine.faces.embedding_model if self.engine.faces else ""
        msg = face_tracks(stamp, width, height, faces, self._image_frame, model)
        self.pub_faces.publish(msg)
        self.conventions.faces(msg.header.stamp, [f.face_id for f in msg.faces])

    def _on_voice(self, ev: VoiceEvent) -> None:
        model = self.engine.voices.embedding_model if self.engine.voices else ""
        msg = voice_segment(ev, self._audio_frame, model)
        self.pub_voices.publish(msg)
        self.conventions.voice(msg.header.stamp, ev.voice_id, ev.end)

    def _on_match(self, c: MatchCandidate) -> None:
        self.pub_matches.publish(entity_match(c))
        self.conventions.match(c.face_id, c.voice_id, c.confidence)

    def _on_identities(self, kind: str, stamp: float, idents: list[IdentityState]) -> None:
        (self.pub_face_ids if kind == "face" else self.pub_voice_ids).publish(identity_list(kind, stamp, idents))

    def _on_update(self, u: VoiceUpdate) -> None:
        """Publish a revision of voices (merges, moved turns) and say it in the log: never a silent rename."""
        self.pub_voice_updates.publish(identity_update(u, self._audio_frame))
        said = [f"{gone} is {keep}" for gone, keep in u.merges]
        said += [f"{voice}'s turns over {face} are a new voice {new}" for voice, new, face in u.splits]
        said += [f"utterance {seg}: {before or 'nobody'} -> {now or 'nobody'}" for seg, before, now in u.corrections]
        self.get_logger().info(f"voices revised at {u.stamp:.1f} s: {'; '.join(said)}")

    def _on_seen(self, seen: Seen) -> None:
        if seen.objects is not None:
            tracks = object_tracks(seen, self._image_frame)
            self.pub_objects.publish(tracks)
            self.conventions.objects(tracks)
        if seen.texts is not None:
            self.pub_texts.publish(text_regions(seen, self._image_frame))

    def _on_error(self, what: str, e: Exception) -> None:
        self.get_logger().warning(f"{what}: {type(e).__name__}: {e}", throttle_duration_sec=WARN_THROTTLE_S)

    def release(self) -> None:
        """Stop the workers (joined) and drop the models; the counts go to the log."""
        if self.engine is None:
            return
        self.engine.close()
        if self.seeing is not None:
            self.seeing.close()
        s = self.engine.stats
        self.get_logger().info(
            f"frames received {s.frames_received}, processed {s.frames_processed}, dropped {s.frames_dropped}, "
            f"bad {self.bad_frames}; audio chunks {s.audio_chunks}, bad {self.bad_chunks}, utterances {s.utterances}; "
            f"bad stamps {self.bad_stamps}; {self.seeing_summary()}"
        )
        self.engine = self.seeing = None

    def seeing_summary(self) -> str:
        """Objects and text counts for the log (what was looked at, dropped, found, and what it cost)."""
        if self.seeing is None:
            return "objects and text off"
        t = self.seeing.stats
        ms = [f"{sum(v) / len(v):.0f} ms" if v else "-" for v in (t.object_ms, t.text_ms)]
        return (
            f"seeing frames {t.frames_processed}, dropped {t.frames_dropped}; object sightings {t.object_sightings} "
            f"(mean {ms[0]}/frame); text keyframes {t.text_keyframes}, regions {t.text_sightings} (mean {ms[1]}/read)"
        )


def main(args: list[str] | None = None) -> None:
    raise SystemExit(run_node(PerceptionNode, NODE_NAME, args))
