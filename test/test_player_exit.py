"""`m3 play` ends a run with exit status 0 (it aborted with SIGABRT, 134, at the end of every run)."""

import json
import subprocess

import numpy as np
import pytest

from m3_agent.recording.bag_reader import bag_info
from m3_agent.recording.video2bag import convert
from m3_agent.recording.video_writer import write_video


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    """A 2 s recording: 5 fps frames and a tone."""
    out = tmp_path_factory.mktemp("player_exit")
    frames = (np.full((120, 160, 3), 10 + 4 * index, np.uint8) for index in range(50))
    t = np.arange(16000 * 2) / 16000
    write_video(out / "clip.mp4", frames, 25, (0.3 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32))
    convert(out / "clip.mp4", out / "bag")
    return out / "bag"


def test_m3_play_exits_0_at_the_end_of_a_run(bag):
    recorded = sum(count for _, count in bag_info(bag).topics.values())
    for _ in range(3):  # the abort was a race at interpreter exit: run it more than once
        result = subprocess.run(
            ["m3", "play", str(bag), "--rate", "0", "--wait-for-subscribers", "0"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
        assert "terminate called" not in result.stderr
        assert json.loads(result.stdout.splitlines()[-1])["published"] == recorded
