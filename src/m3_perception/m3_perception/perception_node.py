"""ROS 2 adapter of the perception logic: parameters, QoS, message conversions.

Subscribes to a camera (sensor_msgs/Image or CompressedImage) and a microphone (AudioChunk),
publishes FaceTracks, VoiceSegment, EntityMatch and latched IdentityList topics. The work is done
by plain modules (engine, face_pipeline, voice_pipeline) on worker threads.
"""

from __future__ import annotations

import math

import rclpy
from builtin_interfaces.msg import Time
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.clock import Clock as RclpyClock
from rclpy.clock import ClockType
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from m3_interfaces.msg import (
    AudioChunk,
    EntityMatch,
    FaceObservation,
    FaceTracks,
    Identity,
    IdentityList,
    VoiceSegment,
)
from m3_perception.assembly import build_pipelines
from m3_perception.audio_codec import AudioDecodeError, decode_chunk
from m3_perception.engine import EngineCallbacks, PerceptionEngine
from m3_perception.face_pipeline import FaceObs
from m3_perception.face_voice_matcher import MatchCandidate
from m3_perception.identity_clusters import IdentityState
from m3_perception.image_codec import ImageDecodeError, decode_compressed, decode_raw
from m3_perception.voice_pipeline import VoiceEvent

NODE_NAME = "perception_node"
WARN_THROTTLE_S = 5.0


def _float(description: str, low: float, high: float) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=description, floating_point_range=[FloatingPointRange(from_value=low, to_value=high)]
    )


def _int(description: str, low: int, high: int) -> ParameterDescriptor:
    return ParameterDescriptor(description=description, integer_range=[IntegerRange(from_value=low, to_value=high)])


def _str(description: str) -> ParameterDescriptor:
    return ParameterDescriptor(description=description)


OUTPUT_DEPTH = 100  # history of the face / voice / match publishers (a few seconds at replay speed)

# name: (default, descriptor) — documented in the package README.
PARAMETERS: dict[str, tuple[object, ParameterDescriptor]] = {
    "image_topic": (
        "/camera/image_raw",
        _str("camera topic; with image_transport 'compressed' '/compressed' is appended"),
    ),
    "image_transport": ("raw", _str("'raw' (sensor_msgs/Image) or 'compressed' (sensor_msgs/CompressedImage)")),
    "audio_topic": ("/audio", _str("microphone topic (m3_interfaces/AudioChunk)")),
    "sensor_reliability": (
        "best_effort",
        _str("camera and microphone QoS: 'best_effort' (sensor data) or 'reliable' (lossless replays over DDS)"),
    ),
    "face_rate_hz": (5.0, _float("frames per second of stream time sent to face processing", 0.1, 60.0)),
    "face_backend": (
        "dlib",
        _str("'dlib' (mediapipe detection + dlib 128-d, embedded) or 'insightface' (buffalo_l SCRFD + ArcFace 512-d)"),
    ),
    "insightface_model_dir": ("", _str("insightface: buffalo_l directory holding det_10g.onnx and w600k_r50.onnx")),
    "face_detector": ("auto", _str("dlib back-end: mediapipe model 'auto' (short+full range merged), 'short', 'full'")),
    "face_min_score": (0.5, _float("minimum detector confidence", 0.0, 1.0)),
    "face_min_size_px": (24, _int("smaller faces are ignored [px]", 8, 4096)),
    "face_match_distance": (
        0.40,
        _float(
            "one person: dlib max L2 between unit embeddings (0.40), insightface max cosine distance (0.70)", 0.05, 2.0
        ),
    ),
    "face_reembed_every_n": (10, _int("re-embed a tracked face every N processed frames", 1, 10000)),
    "face_track_min_iou": (0.3, _float("IoU needed to continue a track", 0.01, 1.0)),
    "face_track_max_age_s": (1.0, _float("a track unseen this long (stream time) ends [s]", 0.05, 60.0)),
    "face_max_crops": (3, _int("best crops kept per face identity", 1, 20)),
    "face_send_crops": (True, ParameterDescriptor(description="attach a JPEG crop to embedded observations")),
    "face_recognition_model": ("", _str("dlib ResNet .dat path; empty: face_recognition_models' file")),
    "face_shape_predictor": ("", _str("dlib 5-point shape predictor .dat path; empty: packaged file")),
    "vad_model": ("", _str("silero VAD ONNX path; empty: the silero-vad package's silero_vad.onnx")),
    "vad_threshold": (0.5, _float("speech probability that starts an utterance", 0.05, 0.99)),
    "min_utterance_s": (0.3, _float("shorter voiced bursts are dropped [s]", 0.0, 10.0)),
    "max_utterance_s": (15.0, _float("longer speech is cut [s]", 1.0, 120.0)),
    "hangover_s": (0.5, _float("silence that ends an utterance [s]", 0.05, 5.0)),
    "speaker_backend": (
        "resemblyzer",
        _str("'resemblyzer' (GE2E 256-d, embedded) or 'eres2netv2' (3D-Speaker 192-d from speaker_model)"),
    ),
    "speaker_model": (
        "",
        _str("resemblyzer: weights .pt (empty: packaged); eres2netv2: ONNX or TorchScript export (required)"),
    ),
    "voice_match_cosine": (
        0.75,
        _float("min cosine between speaker embeddings of one voice (resemblyzer 0.75, eres2netv2 0.6)", 0.0, 1.0),
    ),
    "turn_split": (
        True,
        ParameterDescriptor(description="cut a voiced segment where the speaker changes (back-to-back turns)"),
    ),
    "turn_window_s": (1.0, _float("speaker-turn search: embedded window on each side of a boundary [s]", 0.5, 5.0)),
    "turn_hop_s": (0.1, _float("speaker-turn search: candidate boundaries every hop [s]", 0.02, 1.0)),
    "turn_change_cosine": (
        0.65,
        _float("speaker-turn search: adjacent windows below this cosine mark a change of voice", 0.0, 1.0),
    ),
    "turn_merge_cosine": (
        0.75,
        _float("speaker-turn search: adjacent pieces at or above this cosine are joined again", 0.0, 1.0),
    ),
    "turn_min_s": (
        1.0,
        _float("shortest turn split off; a shorter turn joins a known voice or none, never founds one [s]", 0.25, 10.0),
    ),
    "asr_backend": (
        "faster_whisper",
        _str(
            "'faster_whisper' (CTranslate2 Whisper, embedded default), 'pocketsphinx', 'whisper' (local "
            "transformers model), 'openai' (OpenAI-compatible endpoint) or 'none'"
        ),
    ),
    "asr_model": (
        "base",
        _str(
            "faster_whisper: 'base' (packaged, multilingual), 'tiny.en' (packaged, faster) or a CTranslate2 "
            "Whisper directory; openai: model name sent to the endpoint (e.g. 'whisper-1')"
        ),
    ),
    "asr_device": ("auto", _str("faster_whisper: 'auto' (CUDA when CTranslate2 sees one), 'cpu' or 'cuda'")),
    "asr_compute_type": (
        "auto",
        _str("faster_whisper: 'auto' (int8 on CPU, float16 on CUDA) or a CTranslate2 type such as int8, float16"),
    ),
    "asr_threads": (0, _int("faster_whisper: CPU threads per decode; 0: all cores, at most 4", 0, 64)),
    "asr_beam_size": (5, _int("faster_whisper: beam width (Whisper's usual 5; 1 = greedy)", 1, 16)),
    "asr_word_timestamps": (
        False,
        ParameterDescriptor(description="faster_whisper: word timestamps in each VoiceSegment (costs ~10 % time)"),
    ),
    "asr_model_dir": (
        "",
        _str("pocketsphinx: model dir, empty = packaged; whisper: save_pretrained dir of the model and processor"),
    ),
    "asr_subprocess": (
        True,
        _str("pocketsphinx, faster_whisper: decode in a child process (keeps the GIL free for the other threads)"),
    ),
    "asr_language": (
        "en",
        _str("faster_whisper, whisper: the household's language code (e.g. en, de); empty: detected per utterance"),
    ),
    "asr_torch_threads": (0, _int("whisper: torch CPU threads (process-wide); 0: leave torch's setting", 0, 64)),
    "asr_endpoint": ("http://localhost:8000/v1", _str("openai: base URL serving /audio/transcriptions")),
    "asr_api_key_env": ("OPENAI_API_KEY", _str("openai: environment variable holding the API key (unset: none)")),
    "asr_timeout_s": (30.0, _float("openai: per-request timeout [s]", 1.0, 600.0)),
    "match_min_evidence": (2, _int("utterances over one dominant face before an EntityMatch", 1, 1000)),
    "match_dominance_ratio": (2.0, _float("area ratio for a face to dominate the next one", 1.0, 100.0)),
    "max_audio_backlog_s": (30.0, _float("audio queued beyond this is dropped (counted) [s]", 1.0, 600.0)),
    "identities_period_s": (1.0, _float("min stream time between identity list updates without news [s]", 0.0, 60.0)),
}


def to_sec(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def to_time(t: float) -> Time:
    sec = math.floor(t)
    return Time(sec=int(sec), nanosec=min(999_999_999, round((t - sec) * 1e9)))


class PerceptionNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__(NODE_NAME, **kwargs)
        for name, (default, desc) in PARAMETERS.items():
            self.declare_parameter(name, default, desc)
        g = self.get_parameter
        transport = g("image_transport").value
        if transport not in ("raw", "compressed"):
            raise ValueError(f"image_transport must be 'raw' or 'compressed', got {transport!r}")
        chosen = g("sensor_reliability").value
        reliability = {"best_effort": ReliabilityPolicy.BEST_EFFORT, "reliable": ReliabilityPolicy.RELIABLE}.get(chosen)
        if reliability is None:
            raise ValueError(f"sensor_reliability must be 'best_effort' or 'reliable', got {chosen!r}")
        params = {name: g(name).value for name in PARAMETERS}
        faces, voices, matcher = build_pipelines(params, self.get_logger())  # loads models; a missing file fails here

        latched = QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
        )
        # Reliable with a deep history: a subscriber (the memory node) stalled for a few seconds while
        # perception runs faster than real time (keep-up replay) still receives every result.
        outputs = QoSProfile(depth=OUTPUT_DEPTH, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_faces = self.create_publisher(FaceTracks, "/m3/faces", outputs)
        self.pub_voices = self.create_publisher(VoiceSegment, "/m3/voices", outputs)
        self.pub_matches = self.create_publisher(EntityMatch, "/m3/entity_matches", outputs)
        self.pub_face_ids = self.create_publisher(IdentityList, "/m3/identities/faces", latched)
        self.pub_voice_ids = self.create_publisher(IdentityList, "/m3/identities/voices", latched)
        # Stream time processed so far: `m3 play --keep-up` paces on it (as fast as perception keeps up).
        self.pub_progress = self.create_publisher(Clock, "/m3/perception/processed_until", 10)
        self._progress_sent = float("-inf")
        self._image_frame = ""
        self._audio_frame = ""
        self.bad_frames = 0
        self.bad_chunks = 0

        self.engine = PerceptionEngine(
            faces,
            voices,
            matcher,
            EngineCallbacks(self._on_faces, self._on_voice, self._on_match, self._on_identities, self._on_error),
            face_rate_hz=g("face_rate_hz").value,
            max_audio_backlog_s=g("max_audio_backlog_s").value,
            identities_period_s=g("identities_period_s").value,
        )
        image_topic = g("image_topic").value
        camera_qos = QoSProfile(
            depth=qos_profile_sensor_data.depth, reliability=reliability, durability=DurabilityPolicy.VOLATILE
        )
        if transport == "compressed":
            image_topic = image_topic.rstrip("/") + "/compressed"
            self.create_subscription(CompressedImage, image_topic, self._on_compressed, camera_qos)
        else:
            self.create_subscription(Image, image_topic, self._on_image, camera_qos)
        # Sensor-data QoS (best effort unless sensor_reliability says otherwise) with a deeper history
        # for audio: a chunk lost while the executor is busy is a hole in speech, so 10 s of 0.1 s
        # chunks may wait; a late frame just gets skipped.
        audio_qos = QoSProfile(depth=100, reliability=reliability, durability=DurabilityPolicy.VOLATILE)
        self.create_subscription(AudioChunk, g("audio_topic").value, self._on_audio, audio_qos)
        # Wall (steady) time: with use_sim_time a /clock-driven timer would wait for the very player
        # that waits for this progress.
        self.create_timer(0.05, self._publish_progress, clock=RclpyClock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(f"perception ready: camera {image_topic} ({transport}), audio {g('audio_topic').value}")

    def _publish_progress(self) -> None:
        until = self.engine.processed_until()
        if until > self._progress_sent:
            self._progress_sent = until
            self.pub_progress.publish(Clock(clock=to_time(until)))

    # -- inputs --------------------------------------------------------------------------------
    def _on_image(self, msg: Image) -> None:
        stamp = to_sec(msg.header.stamp)
        if not self.engine.frame_wanted(stamp):
            return
        try:
            rgb = decode_raw(msg.encoding, msg.width, msg.height, msg.step, msg.data)
        except ImageDecodeError as e:
            self._bad_frame(e)
            return
        self._image_frame = msg.header.frame_id
        self.engine.submit_frame(stamp, rgb)

    def _on_compressed(self, msg: CompressedImage) -> None:
        stamp = to_sec(msg.header.stamp)
        if not self.engine.frame_wanted(stamp):
            return
        try:
            rgb = decode_compressed(msg.format, msg.data)
        except ImageDecodeError as e:
            self._bad_frame(e)
            return
        self._image_frame = msg.header.frame_id
        self.engine.submit_frame(stamp, rgb)

    def _on_audio(self, msg: AudioChunk) -> None:
        try:
            samples = decode_chunk(msg.sample_rate, msg.channels, msg.sample_format, msg.data, msg.coding_format)
        except AudioDecodeError as e:
            self.bad_chunks += 1
            self.get_logger().warning(
                f"dropped audio chunk ({self.bad_chunks} so far): {e}", throttle_duration_sec=WARN_THROTTLE_S
            )
            return
        self._audio_frame = msg.header.frame_id
        self.engine.submit_audio(to_sec(msg.header.stamp), samples)

    def _bad_frame(self, e: Exception) -> None:
        self.bad_frames += 1
        self.get_logger().warning(
            f"dropped camera frame ({self.bad_frames} so far): {e}", throttle_duration_sec=WARN_THROTTLE_S
        )

    # -- outputs (worker threads) ----------------------------------------------------------------
    def _on_faces(self, stamp: float, width: int, height: int, faces: list[FaceObs]) -> None:
        msg = FaceTracks(header=Header(stamp=to_time(stamp), frame_id=self._image_frame))
        msg.image_width, msg.image_height = width, height
        model = self.engine.faces.embedding_model if self.engine.faces else ""
        for o in faces:
            x, y, w, h = o.box
            msg.faces.append(
                FaceObservation(
                    face_id=o.face_id,
                    track_id=o.track_id,
                    x=float(x),
                    y=float(y),
                    width=float(w),
                    height=float(h),
                    score=float(o.score),
                    quality=float(o.quality),
                    embedding=o.embedding.astype(float).tolist(),
                    embedding_model=model if o.embedding.size else "",
                    crop_jpeg=list(o.crop_jpeg),
                )
            )
        self.pub_faces.publish(msg)

    def _on_voice(self, ev: VoiceEvent) -> None:
        msg = VoiceSegment(
            header=Header(stamp=to_time(ev.end), frame_id=self._audio_frame),
            segment_id=ev.segment_id,
            voice_id=ev.voice_id,
            start=to_time(ev.start),
            end=to_time(ev.end),
            transcript=ev.transcript.text,
            asr_confidence=float(ev.transcript.confidence),
            language=ev.transcript.language,
            embedding=ev.embedding.astype(float).tolist(),
            embedding_model=self.engine.voices.embedding_model if self.engine.voices else "",
        )
        self.pub_voices.publish(msg)

    def _on_match(self, c: MatchCandidate) -> None:
        self.pub_matches.publish(
            EntityMatch(
                header=Header(stamp=to_time(c.stamp)),
                id1=c.face_id,
                id1_type=EntityMatch.FACE,
                id2=c.voice_id,
                id2_type=EntityMatch.VOICE,
                confidence=float(c.confidence),
                evidence_count=c.evidence_count,
            )
        )

    def _on_identities(self, kind: str, stamp: float, idents: list[IdentityState]) -> None:
        msg = IdentityList(header=Header(stamp=to_time(stamp)))
        k = EntityMatch.FACE if kind == "face" else EntityMatch.VOICE
        for i in idents:
            msg.identities.append(
                Identity(
                    id=i.id,
                    kind=k,
                    observation_count=i.observation_count,
                    first_seen=to_time(i.first_seen),
                    last_seen=to_time(i.last_seen),
                    crop_jpeg=list(i.best_crop()),
                )
            )
        (self.pub_face_ids if kind == "face" else self.pub_voice_ids).publish(msg)

    def _on_error(self, what: str, e: Exception) -> None:
        self.get_logger().warning(f"{what}: {type(e).__name__}: {e}", throttle_duration_sec=WARN_THROTTLE_S)

    def destroy_node(self) -> None:
        self.engine.close()
        s = self.engine.stats
        self.get_logger().info(
            f"frames received {s.frames_received}, processed {s.frames_processed}, dropped {s.frames_dropped}, "
            f"bad {self.bad_frames}; audio chunks {s.audio_chunks}, bad {self.bad_chunks}, utterances {s.utterances}"
        )
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    try:
        node = PerceptionNode()
    except (FileNotFoundError, ValueError, RuntimeError) as e:  # missing model file, bad value, no endpoint
        rclpy.logging.get_logger(NODE_NAME).fatal(f"cannot start: {e}")
        rclpy.try_shutdown()
        raise SystemExit(1) from e
    try:
        rclpy.spin(node, MultiThreadedExecutor())
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
