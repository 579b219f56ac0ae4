"""The perception node over real DDS: an episode of real face photos and synthesised voices.

Run with its own domain:  ROS_DOMAIN_ID=21 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST python -m pytest ...
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import rclpy
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header

from m3_interfaces.msg import AudioChunk, EntityMatch, FaceTracks, IdentityList, VoiceSegment
from m3_perception.material.metrics import wer
from m3_perception.material.synthetic import compose, face_photos, jpeg_claiming, png_claiming, speak
from m3_perception.perception_node import PerceptionNode, to_sec, to_time
from m3_runtime.audio_codec import encode_s16le
from m3_runtime.image_codec import encode_jpeg, encode_raw_rgb8
from m3_runtime.managed_node import bring_up
from m3_runtime.node_shutdown import spinning

T0 = 1000.0  # stream time of the episode start [s]
# Objects and text are tested in test_seeing_node_dds; off here, where their CPU would only delay faces.
SEEING_OFF = [
    rclpy.parameter.Parameter("object_backend", value="none"),
    rclpy.parameter.Parameter("text_backend", value="none"),
]
SCENE_S = 4.0
SLT_1 = "the red folder is on the kitchen table"
KAL_1 = "my name is bob and i like green tea"
SLT_2 = "alice put the keys in the drawer this morning"
KAL_2 = "the meeting starts at three in the afternoon"
# scene: (placements, voice, line); astronaut leaves after scene 1 and returns in scene 3.
SCENES = [
    ([("astronaut", 200, 100, 1.0)], "slt", SLT_1),
    ([("hopper", 20, 60, 0.8), ("cameraman", 380, 100, 1.3)], "kal", KAL_1),  # hopper's box dominates
    ([("astronaut", 350, 60, 1.1)], "slt", SLT_2),
    ([("hopper", 150, 80, 0.8)], "kal", KAL_2),
]


# Bad frames, each 0.25 s after the good frame keyed here (clear of the 5 Hz rate limit): a corrupt
# one, and issue 13's 17 KB JPEG declaring 30000x30000 (decoded to 2.7 GB, mediapipe crashed) and a
# PNG past OpenCV's own pixel limit (an uncaught cv2.error).
BAD_FRAMES = {
    1.0: ("jpeg", b"\x00garbage"),
    2.0: ("jpeg", jpeg_claiming(30000, 30000)),
    3.0: ("png", png_claiming(60000, 60000)),
}


class Recorder(Node):
    """Publishes the episode and records everything the perception node publishes."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__("perception_test_io" + prefix.replace("/", "_"))
        self.faces: list[FaceTracks] = []
        self.voices: list[VoiceSegment] = []
        self.matches: list[EntityMatch] = []
        self.pub_jpeg = self.create_publisher(CompressedImage, "/camera/image_raw/compressed", 50)
        self.pub_raw = self.create_publisher(Image, prefix + "/camera/image_raw", 50)
        self.pub_audio = self.create_publisher(AudioChunk, prefix + "/audio", 500)
        self.create_subscription(FaceTracks, prefix + "/m3/faces", self.faces.append, 100)
        self.create_subscription(VoiceSegment, prefix + "/m3/voices", self.voices.append, 100)
        self.create_subscription(EntityMatch, prefix + "/m3/entity_matches", self.matches.append, 100)

    def audio(self, t: float, x: np.ndarray, data: bytes | None = None, rate: int = 16000) -> None:
        msg = AudioChunk(header=Header(stamp=to_time(t), frame_id="mic"), sample_rate=rate, channels=1)
        msg.sample_format, msg.coding_format = "S16LE", "wave"
        msg.data = data if data is not None else encode_s16le(x)
        self.pub_audio.publish(msg)


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


@pytest.fixture(scope="module")
def ros():
    """The ROS context; each test spins its nodes on an executor of its own (spinning), which stops before
    they are destroyed."""
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.fixture(scope="module")
def episode(ros):
    """Run the compressed-image episode once; tests assert on what was recorded."""
    node = bring_up(
        PerceptionNode(
            parameter_overrides=[*SEEING_OFF, rclpy.parameter.Parameter("image_transport", value="compressed")]
        )
    )
    io = Recorder()
    with spinning(node, io):  # stopped, and the nodes destroyed, after the module
        assert wait_for(
            lambda: (
                io.pub_jpeg.get_subscription_count() > 0
                and io.pub_audio.get_subscription_count() > 0
                and node.pub_faces.get_subscription_count() > 0
                and node.pub_voices.get_subscription_count() > 0
            ),
            20.0,
        ), "DDS discovery between the test node and the perception node did not complete"
        photos = face_photos()
        frames = [encode_jpeg(compose(photos, pl), 90) for pl, _, _ in SCENES]
        speech = [speak(line, voice) for _, voice, line in SCENES]
        # Audio track: each line starts 0.5 s into its scene; silence elsewhere; 1 s of silence at the end.
        total = int((len(SCENES) * SCENE_S + 1.0) * 16000)
        track = np.zeros(total, np.float32)
        for k, x in enumerate(speech):
            a = int((k * SCENE_S + 0.5) * 16000)
            assert len(x) < (SCENE_S - 1.0) * 16000, "a test line is too long for its scene"
            track[a : a + len(x)] = x
        chunk = 1600  # 100 ms
        frame_dt = 0.5
        next_frame = 0.0
        for i in range(0, total, chunk):
            t = i / 16000
            while next_frame <= t and next_frame < len(SCENES) * SCENE_S:
                msg = CompressedImage(header=Header(stamp=to_time(T0 + next_frame), frame_id="cam"), format="jpeg")
                msg.data = frames[int(next_frame // SCENE_S)]
                io.pub_jpeg.publish(msg)
                if next_frame in BAD_FRAMES:
                    bad = CompressedImage(header=Header(stamp=to_time(T0 + next_frame + 0.25), frame_id="cam"))
                    bad.format, bad.data = BAD_FRAMES[next_frame]
                    io.pub_jpeg.publish(bad)
                if next_frame == 5.0:  # stamped 10^6 s ahead: its stamp is dropped (issue 13)
                    io.pub_jpeg.publish(
                        CompressedImage(header=Header(stamp=to_time(T0 + 1e6)), format="jpeg", data=frames[0])
                    )
                next_frame += frame_dt
            io.audio(T0 + t, track[i : i + chunk])
            if i == 10 * chunk:
                io.audio(T0 + t + 0.05, track[:0], data=b"\x01\x02\x03")  # odd byte count: dropped, reported
                # Issue 13: sample rates that made the resampler raise MemoryError / allocate 4.7 GB.
                io.audio(T0 + t + 0.05, track[:0], data=bytes(65536), rate=999_999_937)
                io.audio(T0 + t + 0.05, track[:0], data=bytes(65536), rate=1)
            if i == 90 * chunk:  # a whole utterance stamped 1 s before Time's int32 end (published end < 0)
                io.audio(2**31 - 2.0, track[:0], data=encode_s16le(np.concatenate([speech[0], np.zeros(16000)])))
            time.sleep(0.025)  # ~4x real time
        assert wait_for(lambda: len(io.voices) >= len(SCENES) and node.engine.idle(), 120.0), (
            f"voices {[(v.voice_id, v.transcript) for v in io.voices]}"
        )
        time.sleep(0.5)
        yield node, io


def _scene(t: float) -> int:
    return int((t - T0) // SCENE_S)


def test_face_ids_stable_and_distinct(episode) -> None:
    _, io = episode
    per_scene: dict[int, list[list[tuple[float, str]]]] = {}
    for m in io.faces:
        per_scene.setdefault(_scene(to_sec(m.header.stamp)), []).append([(f.x, f.face_id) for f in m.faces])
    assert set(per_scene) == {0, 1, 2, 3}, "every scene had processed frames"
    # A new person's first processed frame waits for a second agreeing embedding (face_id ""); people
    # seen before (scenes 3 and 4) are recognised at once.
    pending = [(s, k) for s, frames in per_scene.items() for k, f in enumerate(frames) if any(not i for _, i in f)]
    assert set(pending) <= {(0, 0), (1, 0)}, pending
    per_scene = {s: frames[1:] if (s, 0) in pending else frames for s, frames in per_scene.items()}
    astronaut = {fid for frame in per_scene[0] + per_scene[2] for _, fid in frame}
    hopper = {fid for frame in per_scene[3] for _, fid in frame}
    two = [sorted(frame) for frame in per_scene[1]]
    assert two and all(len(f) == 2 for f in two), two
    hopper |= {f[0][1] for f in two}  # left face of scene 2
    cameraman = {f[1][1] for f in two}
    assert len(astronaut) == 1 and len(hopper) == 1 and len(cameraman) == 1, (astronaut, hopper, cameraman)
    assert len(astronaut | hopper | cameraman) == 3 and "" not in astronaut | hopper | cameraman
    first = io.faces[0].faces[0]
    assert (
        len(first.embedding) == 128
        and first.embedding_model == "dlib_resnet_v1"
        and bytes(first.crop_jpeg)[:2] == b"\xff\xd8"
    )
    assert io.faces[0].image_width == 640 and io.faces[0].header.frame_id == "cam"


def test_voice_ids_and_transcripts(episode) -> None:
    _, io = episode
    v = sorted(io.voices, key=lambda m: to_sec(m.start))
    assert len(v) == 4, [(m.voice_id, m.transcript) for m in v]
    ids = [m.voice_id for m in v]
    assert ids[0] == ids[2] and ids[1] == ids[3] and ids[0] != ids[1], ids
    for k, m in enumerate(v):
        assert _scene(to_sec(m.start)) == k and to_sec(m.end) > to_sec(m.start) + 1.0
        assert len(m.embedding) == 192 and m.embedding_model == "campplus" and m.language == "en"
        assert 0.0 <= m.asr_confidence <= 1.0
    assert wer(SLT_1, v[0].transcript) <= 0.35, v[0].transcript
    assert wer(SLT_2, v[2].transcript) <= 0.35, v[2].transcript
    assert [m.segment_id for m in v] == [1, 2, 3, 4]


def test_face_voice_match(episode) -> None:
    _, io = episode
    v = sorted(io.voices, key=lambda m: to_sec(m.start))
    astronaut_face = next(
        m.faces[0].face_id for m in io.faces if _scene(to_sec(m.header.stamp)) == 0 and m.faces[0].face_id
    )
    best = [m for m in io.matches if m.id2 == v[0].voice_id]
    assert best, [(m.id1, m.id2, m.evidence_count) for m in io.matches]
    m = best[-1]
    assert (m.id1, m.id1_type, m.id2_type) == (astronaut_face, EntityMatch.FACE, EntityMatch.VOICE)
    assert m.evidence_count >= 2 and 0.0 < m.confidence <= 1.0
    # kal speaks in scene 2 (hopper's box dominates the cameraman's) and scene 4 (hopper alone).
    hopper_face = next(m.faces[0].face_id for m in io.faces if _scene(to_sec(m.header.stamp)) == 3)
    kal = [mm for mm in io.matches if mm.id2 == v[1].voice_id]
    assert kal and kal[-1].id1 == hopper_face and kal[-1].evidence_count == 2


def test_bad_input_dropped_and_counted(episode) -> None:
    """Each bad message was dropped and the node went on (the other tests check what followed)."""
    node, io = episode
    assert node.bad_frames == 3 and node.bad_chunks == 3 and node.bad_stamps == 2
    assert node.engine.stats.frames_processed >= 8
    end = T0 + len(SCENES) * SCENE_S + 1.0
    assert all(T0 <= to_sec(m.header.stamp) < end for m in io.faces), [to_sec(m.header.stamp) for m in io.faces]
    assert all(T0 <= to_sec(v.start) <= to_sec(v.end) < end for v in io.voices), [
        (to_sec(v.start), to_sec(v.end)) for v in io.voices
    ]


def test_identity_lists_latched(episode, ros) -> None:
    late = Node("perception_test_late")
    got: dict[str, IdentityList] = {}
    qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
    late.create_subscription(IdentityList, "/m3/identities/faces", lambda m: got.__setitem__("faces", m), qos)
    late.create_subscription(IdentityList, "/m3/identities/voices", lambda m: got.__setitem__("voices", m), qos)
    with spinning(late):
        assert wait_for(lambda: len(got) == 2, 15.0), "late subscriber got no latched identity lists"
        faces, voices = got["faces"].identities, got["voices"].identities
        assert [i.id for i in faces] == ["face_1", "face_2", "face_3"]
        assert [i.id for i in voices] == ["voice_1", "voice_2"]
        assert all(bytes(i.crop_jpeg)[:2] == b"\xff\xd8" and i.kind == EntityMatch.FACE for i in faces)
        assert all(i.kind == EntityMatch.VOICE and i.observation_count == 2 for i in voices)
        assert all(to_sec(i.first_seen) >= T0 and to_sec(i.last_seen) >= to_sec(i.first_seen) for i in faces)


def test_raw_images_and_missing_model(ros, tmp_path) -> None:
    """A second node on raw Image (remapped topics), plus a bad encoding; then a missing model."""
    node = PerceptionNode(
        parameter_overrides=SEEING_OFF,
        cli_args=[
            "--ros-args",
            "-r",
            "/m3/faces:=/raw/m3/faces",
            "-r",
            "/camera/image_raw:=/raw/camera/image_raw",
            "-r",
            "/audio:=/raw/audio",
            "-r",
            "/m3/voices:=/raw/m3/voices",
            "-r",
            "/m3/entity_matches:=/raw/m3/entity_matches",
            "-r",
            "/m3/identities/faces:=/raw/m3/identities/faces",
            "-r",
            "/m3/identities/voices:=/raw/m3/identities/voices",
        ],
    )
    bring_up(node)
    io = Recorder("/raw")
    with spinning(node, io):
        assert wait_for(
            lambda: io.pub_raw.get_subscription_count() > 0 and node.pub_faces.get_subscription_count() > 0, 20.0
        )
        img = compose(face_photos(), SCENES[1][0])
        enc, w, h, step, data = encode_raw_rgb8(img)
        # Five frames: the face worker keeps only the latest frame while busy, and the first frame
        # (first inference) can outlast the next two on loaded cores; identities need a few sightings.
        for k in range(5):
            io.pub_raw.publish(
                Image(
                    header=Header(stamp=to_time(5.0 + k), frame_id="cam"),
                    encoding=enc,
                    width=w,
                    height=h,
                    step=step,
                    data=data,
                )
            )
            time.sleep(0.3)
        io.pub_raw.publish(
            Image(header=Header(stamp=to_time(11.0)), encoding="yuv422", width=w, height=h, step=step, data=data)
        )

        def identified() -> list[list[tuple[float, str]]]:
            return [sorted((f.x, f.face_id) for f in m.faces) for m in io.faces if all(f.face_id for f in m.faces)]

        assert wait_for(lambda: len(identified()) >= 1 and node.bad_frames == 1, 30.0), (
            len(io.faces),
            node.bad_frames,
        )
        assert all(len(m.faces) == 2 for m in io.faces)
        ids = identified()
        assert len({(f[0][1], f[1][1]) for f in ids}) == 1 and ids[0][0][1] != ids[0][1][1]
    from m3_perception.model_files import ModelFileMissing

    missing = PerceptionNode(
        parameter_overrides=[rclpy.parameter.Parameter("face_recognition_model", value=str(tmp_path / "absent.dat"))]
    )
    with pytest.raises(ModelFileMissing, match=r"absent\.dat"):
        bring_up(missing)
    missing.destroy_node()


def test_sensor_reliability_sets_the_camera_and_microphone_qos(episode, ros) -> None:
    """Default sensor-data (best effort) subscriptions; 'reliable' for lossless replays; a typo refused."""
    reliable = PerceptionNode(
        cli_args=["--ros-args", "-r", "__node:=perception_reliable", "-r", "/audio:=/reliable/audio"],
        parameter_overrides=[
            *SEEING_OFF,
            rclpy.parameter.Parameter("sensor_reliability", value="reliable"),
            rclpy.parameter.Parameter("image_topic", value="/reliable/camera/image_raw"),
        ],
    )
    bring_up(reliable)
    probe = Node("qos_probe")
    with spinning(reliable, probe):

        def reliability(topic: str, node_name: str):
            infos = [i for i in probe.get_subscriptions_info_by_topic(topic) if i.node_name == node_name]
            return infos[0].qos_profile.reliability if infos else None

        assert wait_for(lambda: reliability("/reliable/audio", "perception_reliable") is not None, 20.0)
        assert reliability("/reliable/camera/image_raw", "perception_reliable") == ReliabilityPolicy.RELIABLE
        assert reliability("/reliable/audio", "perception_reliable") == ReliabilityPolicy.RELIABLE
        # The episode's node (default parameters) is the only subscriber of its topics here; its name
        # may show as unknown in the graph after the missing-model test's half-built namesake.
        for topic in ("/camera/image_raw/compressed", "/audio"):
            assert {i.qos_profile.reliability for i in probe.get_subscriptions_info_by_topic(topic)} == {
                ReliabilityPolicy.BEST_EFFORT
            }
    typo = PerceptionNode(parameter_overrides=[rclpy.parameter.Parameter("sensor_reliability", value="sometimes")])
    with pytest.raises(ValueError, match="sensor_reliability must be 'best_effort' or 'reliable', got 'sometimes'"):
        bring_up(typo)
    typo.destroy_node()
