"""`m3 video2bag --poses`: a robot's pose track from CSV or JSON goes into the bag as AMCL-style
PoseWithCovarianceStamped, stamped on the video's clock and in time order with frames and audio; a bad pose
file is one clear error naming the file and the row."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from m3_agent.recording.bag_reader import deserialize, iter_messages
from m3_agent.recording.pose_track import PoseFileError, load_poses
from m3_agent.recording.video2bag import ConversionOptions, convert
from m3_agent.recording.video_writer import write_video

SECONDS = 3


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    path = tmp_path_factory.mktemp("posevideo") / "walk.mp4"
    frames = (np.full((120, 160, 3), 40, np.uint8) for _ in range(10 * SECONDS))
    t = np.arange(16000 * SECONDS) / 16000
    write_video(path, frames, 10, (0.2 * np.sin(2 * np.pi * 300 * t)).astype(np.float32))
    return path


def test_a_csv_track_goes_into_the_bag_in_time_order(video, tmp_path):
    track = tmp_path / "track.csv"
    rows = [f"{0.5 * i},{0.2 * i},1.5,{0.1 * i}" for i in range(2 * SECONDS + 1)]
    track.write_text("t,x,y,yaw\n" + "\n".join(rows) + "\n")
    report = convert(
        video, tmp_path / "bag", ConversionOptions(fps=2, start_time_s=100.0, poses=tuple(load_poses(track)))
    )
    assert report.poses == 2 * SECONDS + 1
    poses = [deserialize(m) for m in iter_messages(tmp_path / "bag", ["/amcl_pose"])]
    assert [p.header.stamp.sec + p.header.stamp.nanosec / 1e9 for p in poses] == pytest.approx(
        [100.0 + 0.5 * i for i in range(2 * SECONDS + 1)]
    )
    last = poses[-1]
    assert last.header.frame_id == "map" and last.pose.pose.position.x == pytest.approx(0.2 * 2 * SECONDS)
    assert 2 * math.atan2(last.pose.pose.orientation.z, last.pose.pose.orientation.w) == pytest.approx(0.6)
    with Reader(tmp_path / "bag") as reader:
        stamps = [timestamp for _, timestamp, _ in reader.messages()]
    assert stamps == sorted(stamps)  # frames, audio and poses interleaved by time


def test_a_json_track_and_the_command(video, tmp_path):
    track = tmp_path / "track.json"
    poses = [{"t": 0, "x": 1, "y": 2, "yaw": 0}, {"t": 1, "x": 2, "y": 2, "yaw": 0}]
    track.write_text(json.dumps({"frame_id": "odom", "poses": poses}))
    command = [
        "m3",
        "video2bag",
        str(video),
        str(tmp_path / "cli"),
        "--poses",
        str(track),
        "--pose-topic",
        "/odom_pose",
    ]
    result = subprocess.run([*command, "--quiet"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["poses"] == 2
    (first, _) = [deserialize(m) for m in iter_messages(tmp_path / "cli", ["/odom_pose"])]
    assert first.header.frame_id == "odom"


@pytest.mark.parametrize(
    ("content", "suffix", "words"),
    [
        ("t,x,y\n0,1,2\n", ".csv", "lacks ['yaw']"),
        ("t,x,y,yaw\n0,1,2,0\n0,1,2,0\n", ".csv", "pose 2: t 0.0 s must be >= 0 and after the pose before"),
        ("t,x,y,yaw\n0,one,2,0\n", ".csv", "pose 1: x is not a number"),
        ("t,x,y,yaw\n0,nan,2,0\n", ".csv", "pose 1: x is not finite"),
        ('[{"t": 0, "x": 1}]', ".json", "pose 1: y is not a number"),
        ('{"poses": []}', ".json", "no poses"),
        ("{oops", ".json", "not JSON"),
    ],
)
def test_bad_pose_files_are_refused_naming_the_row(tmp_path, content, suffix, words, video):
    track = tmp_path / f"bad{suffix}"
    track.write_text(content)
    with pytest.raises(PoseFileError) as caught:
        load_poses(track)
    assert words in str(caught.value) and str(track) in str(caught.value)
    result = subprocess.run(
        ["m3", "video2bag", str(video), str(tmp_path / "out"), "--poses", str(track), "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and words in result.stderr and not (tmp_path / "out").exists()
