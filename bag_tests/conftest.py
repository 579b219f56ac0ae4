"""Shared fixtures: a short two-person episode rendered offline and recorded into a rosbag2."""

from pathlib import Path

import pytest

from m3_agent.demo.generate import generate
from m3_agent.recording.video2bag import convert

TWO_PEOPLE = Path(__file__).resolve().parents[1] / "test" / "data" / "two_people.yaml"


@pytest.fixture(scope="session")
def episode_bag(tmp_path_factory):
    out = tmp_path_factory.mktemp("bag_episode")
    generate(out, TWO_PEOPLE)
    convert(out / "episode.mp4", out / "bag")
    return out / "bag"
