"""The demo episode generator: timeline, video, ground truth and M3-Bench-format questions."""

import itertools
import json
import math
import subprocess

import av
import pytest
import yaml

from m3_agent.demo.generate import CLIP_SECONDS, default_script, generate
from m3_agent.demo.photos import load_photo

SCRIPT = {
    "episode_id": "tiny",
    "fps": 5,
    "width": 320,
    "height": 240,
    "gap_s": 0.5,
    "people": {
        "alice": {"name": "Alice", "photo": "skimage:astronaut", "voice": "festival:cmu_us_slt_arctic_hts"},
        "bob": {"name": "Bob", "photo": "skimage:camera", "voice": "espeak:en-us"},
    },
    "scenes": [
        {"present": ["alice", "bob"], "lines": [["alice", "My name is Alice."], ["bob", "I am Bob."]]},
        {"present": ["bob"], "silent_s": 2, "lines": [["bob", "The keys are in the drawer."]]},
    ],
    "questions": [
        {"q": "Where are the keys?", "a": "In the drawer", "type": ["Multi-Detail Reasoning"], "at": "end"},
        {"q": "Who is Bob?", "a": "A person", "type": ["Person Understanding"], "at": "after:0.1"},
    ],
}


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    out = tmp_path_factory.mktemp("episode")
    script = out / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    paths = generate(out, script)
    return {name: json.loads(open(path).read()) if name != "video" else path for name, path in paths.items()}


def test_timeline_orders_lines_without_overlap(episode):
    utterances = episode["truth"]["utterances"]
    assert [(u["person"], u["text"]) for u in utterances] == [
        ("alice", "My name is Alice."),
        ("bob", "I am Bob."),
        ("bob", "The keys are in the drawer."),
    ]
    for before, after in itertools.pairwise(utterances):
        assert before["end_s"] + 0.5 <= after["start_s"] + 1e-6
    assert utterances[2]["start_s"] >= episode["truth"]["scenes"][1]["start_s"] + 2  # the silent presence
    assert all(0.5 < u["end_s"] - u["start_s"] < 5 for u in utterances)


def test_video_has_frames_and_audio_for_the_whole_episode(episode):
    duration = episode["truth"]["duration_s"]
    with av.open(episode["video"]) as container:
        frames = sum(1 for _ in container.decode(video=0))
    with av.open(episode["video"]) as container:
        audio_s = sum(frame.samples for frame in container.decode(audio=0)) / 16000
    assert frames == math.ceil(duration * 5)
    assert audio_s == pytest.approx(duration, abs=0.2)


def test_questions_follow_m3_bench_format(episode):
    ((episode_id, entry),) = episode["questions"].items()
    assert episode_id == "tiny" and set(entry) == {"video_path", "mem_path", "qa_list"}
    end, early = entry["qa_list"]
    assert set(end) == {"question", "answer", "question_id", "reasoning", "timestamp", "type", "before_clip"}
    for qa in (end, early):
        minutes, seconds = (int(x) for x in qa["timestamp"].split(":"))
        assert qa["before_clip"] == (minutes * 60 + seconds) // CLIP_SECONDS - 1  # M3-Bench's rule
        assert qa["before_clip"] >= 0  # -1 would be no as-of limit: the whole episode's memory
    # asked after line 0.1 (a few seconds in), but not before the first clip has closed
    assert math.ceil(episode["truth"]["utterances"][1]["end_s"]) + 1 < CLIP_SECONDS
    assert early["timestamp"] == f"00:{CLIP_SECONDS:02d}" and early["before_clip"] == 0


def test_built_in_episode_script_is_three_to_five_minutes_of_material():
    script = yaml.safe_load(default_script().read_text())
    assert len(script["people"]) >= 3
    assert {t for q in script["questions"] for t in q["type"]} == {
        "Multi-Detail Reasoning",
        "Person Understanding",
        "Cross-Modal Reasoning",
        "General Knowledge Extraction",
        "Multi-Hop Reasoning",
    }
    lines = sum(len(scene["lines"]) for scene in script["scenes"])
    assert lines >= 35  # ~3 s each plus gaps: over three minutes


def test_photos_come_from_installed_packages():
    assert load_photo("skimage:astronaut").shape == (512, 512, 3)
    assert load_photo("matplotlib:grace_hopper.jpg").shape[2] == 3
    with pytest.raises(ValueError, match="unknown photo source"):
        load_photo("web:https://example.com/face.jpg")


def test_make_episode_command_reports_paths(tmp_path):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({**SCRIPT, "scenes": SCRIPT["scenes"][:1], "questions": SCRIPT["questions"][:1]}))
    result = subprocess.run(
        ["m3", "make-episode", str(tmp_path / "out"), "--script", str(script)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["video"].endswith("episode.mp4")
