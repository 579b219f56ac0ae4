"""Shared fixtures: a short two-person episode in two rooms, rendered offline and recorded into a rosbag2."""

from pathlib import Path

import pytest

from m3_agent.demo.generate import generate
from m3_agent.demo.places import place_setup
from m3_agent.recording.video2bag import ConversionOptions, convert

TWO_PEOPLE = Path(__file__).resolve().parents[1] / "test" / "data" / "two_people.yaml"


@pytest.fixture(scope="session")
def episode_dir(tmp_path_factory):
    """The episode rendered, with its regions file and the robot's pose track through two rooms."""
    out = tmp_path_factory.mktemp("bag_episode")
    generate(out, TWO_PEOPLE)
    return out


@pytest.fixture(scope="session")
def episode_bag(episode_dir):
    """The episode recorded into a rosbag2 with camera, microphone and AMCL's pose topic."""
    poses, _ = place_setup(episode_dir)
    convert(episode_dir / "episode.mp4", episode_dir / "bag", ConversionOptions(poses=poses))
    return episode_dir / "bag"


@pytest.fixture(scope="session")
def place_parameters(episode_dir) -> list[str]:
    """`m3 run --set` arguments: the memory node follows the pose topic with the episode's regions, and
    the control node plans to them."""
    _, parameters = place_setup(episode_dir)
    return [f"{node}.{name}={value}" for node, values in parameters.items() for name, value in values.items()]
