"""video2bag, the bag reader and the bag player, on a video generated here."""

import json
import subprocess
import time

import numpy as np
import pytest
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import Reader

from m3_agent.recording.bag_reader import bag_info, deserialize, iter_messages
from m3_agent.recording.player import (
    BagPlayer,
    PlaybackOptions,
    consumed_topics,
    keep_up_target,
    parse_remaps,
    stream_stamp_ns,
)
from m3_agent.recording.video2bag import ConversionOptions, convert
from m3_agent.recording.video_writer import write_video
from m3_runtime.node_shutdown import spinning

FPS = 25
SECONDS = 4
TONE_HZ = 440.0


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    """4 s of 320x240 video whose brightness encodes the frame index, and a 440 Hz tone."""
    path = tmp_path_factory.mktemp("video") / "episode.mp4"
    frames = (np.full((240, 320, 3), 10 + 2 * index, np.uint8) for index in range(FPS * SECONDS))
    t = np.arange(16000 * SECONDS) / 16000
    write_video(path, frames, FPS, (0.3 * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32))
    return path


@pytest.fixture(scope="module")
def bag(video, tmp_path_factory):
    out = tmp_path_factory.mktemp("bags") / "episode"
    report = convert(video, out, ConversionOptions(fps=5))
    assert report.frames == 5 * SECONDS
    return out


def test_bag_reads_back_with_rosbags(bag):
    with Reader(bag) as reader:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    assert topics["/camera/image_raw/compressed"] == ("sensor_msgs/msg/CompressedImage", 5 * SECONDS)
    msgtype, chunks = topics["/audio"]
    assert msgtype == "m3_interfaces/msg/AudioChunk"
    assert chunks == pytest.approx(10 * SECONDS, abs=2)  # 0.1 s chunks; AAC pads a little


def test_image_stamps_follow_the_frame_rate_and_jpegs_decode(bag):
    import cv2

    images = [deserialize(m) for m in iter_messages(bag, ["/camera/image_raw/compressed"])]
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec / 1e9 for m in images]
    assert stamps == pytest.approx([i / 5 for i in range(5 * SECONDS)], abs=1 / FPS)
    brightness = []
    for message in images:
        assert message.format == "jpeg"
        decoded = cv2.imdecode(np.asarray(message.data, np.uint8), cv2.IMREAD_COLOR)
        assert decoded.shape == (240, 320, 3)
        brightness.append(float(decoded.mean()))
    # frame k of the 25 fps video has brightness 10 + 2k; every 5th frame is kept
    assert brightness == pytest.approx([10 + 2 * 5 * i for i in range(5 * SECONDS)], abs=3)


def test_audio_is_16k_mono_pcm_with_contiguous_stamps(bag):
    chunks = [deserialize(m) for m in iter_messages(bag, ["/audio"])]
    assert {(c.sample_rate, c.channels, c.sample_format) for c in chunks} == {(16000, 1, "S16LE")}
    starts = [c.header.stamp.sec + c.header.stamp.nanosec / 1e9 for c in chunks]
    assert np.diff(starts[:-1]) == pytest.approx(0.1, abs=1e-6)
    samples = np.concatenate([np.asarray(c.data, np.uint8).view("<i2") for c in chunks]).astype(np.float32)
    spectrum = np.abs(np.fft.rfft(samples[16000 : 16000 * 3]))
    assert np.argmax(spectrum) * 16000 / len(samples[16000 : 16000 * 3]) == pytest.approx(TONE_HZ, abs=2)


def test_sqlite3_storage(video, tmp_path):
    convert(video, tmp_path / "sq", ConversionOptions(storage="sqlite3"))
    assert (tmp_path / "sq" / "sq.db3").exists()
    assert bag_info(tmp_path / "sq").topics["/camera/image_raw/compressed"][1] == 5 * SECONDS


def test_conversion_errors_are_clear(video, tmp_path):
    with pytest.raises(FileNotFoundError, match="video not found"):
        convert(tmp_path / "missing.mp4", tmp_path / "out")
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(b"not a video at all" * 100)
    with pytest.raises(ValueError, match="cannot decode"):
        convert(garbage, tmp_path / "out")
    (tmp_path / "exists").mkdir()
    with pytest.raises(FileExistsError):
        convert(video, tmp_path / "exists")
    with pytest.raises(ValueError, match="fps"):
        convert(video, tmp_path / "out2", ConversionOptions(fps=0))


def test_video2bag_command(video, tmp_path):
    result = subprocess.run(
        ["m3", "video2bag", str(video), str(tmp_path / "cli"), "--fps", "2", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["frames"] == 2 * SECONDS
    again = subprocess.run(["m3", "video2bag", str(video), str(tmp_path / "cli")], capture_output=True, text=True)
    assert again.returncode == 2 and "already exists" in again.stderr


def test_remap_parsing():
    assert parse_remaps(["/audio:=/mic"]) == {"/audio": "/mic"}
    with pytest.raises(ValueError, match="/from:=/to"):
        parse_remaps(["audio=mic"])


def test_player_publishes_every_message_with_clock_and_remaps(bag):
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import CompressedImage

    from m3_interfaces.msg import AudioChunk

    rclpy.init()
    try:
        player_node, listener = Node("bag_player_under_test"), Node("bag_listener")
        qos = QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE)
        audio, images, clock = [], [], []
        listener.create_subscription(AudioChunk, "/mic", audio.append, qos)
        listener.create_subscription(CompressedImage, "/camera/image_raw/compressed", images.append, qos)
        listener.create_subscription(Clock, "/clock", clock.append, 10)
        options = PlaybackOptions(rate=4.0, remaps={"/audio": "/mic"}, wait_for_subscribers_s=10)
        with spinning(listener):
            started = time.monotonic()
            published = BagPlayer(player_node, str(bag), options).play()
            elapsed = time.monotonic() - started
            deadline = time.monotonic() + 5
            while len(audio) + len(images) < published and time.monotonic() < deadline:
                time.sleep(0.05)
        assert len(images) == 5 * SECONDS
        assert len(audio) + len(images) == published
        last_stamp_s = (SECONDS * 1e9 - 1e8) / 1e9  # the last audio chunk starts 0.1 s before the end
        assert elapsed >= 0.95 * last_stamp_s / 4.0  # paced by the rate multiplier, never faster
        assert clock and clock[-1].clock.sec >= SECONDS - 1
    finally:
        rclpy.try_shutdown()


def test_keep_up_never_waits_past_what_was_sent_on_a_topic():
    """Lead first; then no further than the last message sent on each topic (a consumer holds its
    progress at a stream's last input, so waiting beyond it would stall forever)."""
    s = 1_000_000_000
    assert keep_up_target(10 * s, 0.25, {}) == 10 * s - s // 4
    assert keep_up_target(10 * s, 0.25, {"/camera": 10 * s, "/audio": 9_900_000_000}) == 9_750_000_000
    assert keep_up_target(10 * s, 0.25, {"/camera": 2 * s, "/audio": 9_900_000_000}) == 2 * s  # camera stopped
    # a pose track every 0.5 s that the consumer does not take must not lower the bar (two frames in flight)
    sent = {"/camera": 9_800_000_000, "/audio": 9_900_000_000, "/amcl_pose": 9_510_000_000}
    assert keep_up_target(10 * s, 0.25, sent, {"/camera", "/audio"}) == 9_750_000_000
    assert keep_up_target(10 * s, 0.25, sent) == 9_510_000_000  # consumer not known yet: every topic caps
    assert keep_up_target(10 * s, 0.25, {**sent, "/audio": 3 * s}, {"/camera", "/audio"}) == 3 * s


def test_the_consumer_takes_the_topics_its_node_subscribes_to():
    perception, memory = ("perception_node", "/"), ("memory_node", "/")
    subscribers = {"/camera": {perception}, "/audio": {perception, memory}, "/amcl_pose": {memory}, "/x": set()}
    assert consumed_topics({perception}, subscribers) == {"/camera", "/audio"}
    assert consumed_topics(set(), subscribers) is None  # the progress topic's publisher not discovered yet


def test_progress_is_counted_in_header_stamps():
    from m3_agent.recording.typestore import m3_typestore

    store = m3_typestore()
    header = store.types["std_msgs/msg/Header"](store.types["builtin_interfaces/msg/Time"](sec=3, nanosec=5), "cam")
    assert stream_stamp_ns(type("Msg", (), {"header": header})(), 42) == 3_000_000_005
    assert stream_stamp_ns(None, 42) == 42  # a type the store does not know: its log time
