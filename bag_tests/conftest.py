"""Shared fixtures: a short two-person episode rendered offline and recorded into a rosbag2."""

import pytest
import yaml

from m3_agent.demo.generate import generate
from m3_agent.recording.video2bag import convert

SCRIPT = {
    "episode_id": "bag_test",
    "fps": 5,
    "width": 640,
    "height": 480,
    "gap_s": 1.2,
    "people": {
        "alice": {
            "name": "Alice",
            "photo": "skimage:astronaut",
            "crop": [116, 0, 220, 260],
            "voice": "festival:cmu_us_slt_arctic_hts",
        },
        "carol": {
            "name": "Carol",
            "photo": "matplotlib:grace_hopper.jpg",
            "crop": [56, 0, 420, 500],
            "voice": "festival:kal_diphone",
        },
    },
    "scenes": [
        {
            "present": ["alice", "carol"],
            "lines": [
                ["alice", "Good morning. My name is Alice."],
                ["alice", "I put the red folder in the kitchen drawer."],
                ["carol", "I like black coffee."],
                ["alice", "I like green tea in the morning."],
            ],
        },
    ],
    "questions": [
        {
            "q": "Where did Alice put the red folder?",
            "a": "kitchen drawer",
            "type": ["Multi-Detail Reasoning"],
            "at": "end",
        }
    ],
}


@pytest.fixture(scope="session")
def episode_bag(tmp_path_factory):
    out = tmp_path_factory.mktemp("bag_episode")
    script = out / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    generate(out, script)
    convert(out / "episode.mp4", out / "bag")
    return out / "bag"
