"""m3 replay: a generated episode → rosbag2 → perception + memory in one process → memory on disk."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from m3_agent.bringup import default_params_file
from m3_agent.demo.generate import generate
from m3_agent.recording.bag_reader import bag_info
from m3_agent.recording.video2bag import convert

TWO_PEOPLE = Path(__file__).with_name("data") / "two_people.yaml"


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    out = tmp_path_factory.mktemp("replay")
    generate(out, TWO_PEOPLE)
    convert(out / "episode.mp4", out / "bag")
    return out / "bag"


@pytest.fixture(scope="module")
def replayed(bag, tmp_path_factory):
    memory = tmp_path_factory.mktemp("memory") / "mem"
    result = subprocess.run(
        ["m3", "replay", str(bag), "--memory", str(memory), "--quiet"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return memory, json.loads(result.stdout.splitlines()[-1])


def test_replay_builds_a_memory_of_who_was_seen_and_said_what(bag, replayed):
    from m3_memory.store import MemoryStore

    memory_dir, report = replayed
    assert report["clips_stored"] >= 1 and report["bad_messages"] == 0
    frames_in_bag = bag_info(bag).topics["/camera/image_raw/compressed"][1]
    assert report["frames_processed"] == frames_in_bag  # lossless: every 5 fps frame is processed
    store = MemoryStore(str(memory_dir), create=False)
    try:
        export = store.export_json()
        assert store.integrity_check() == []
    finally:
        store.close()
    faces = [e for e in export["entities"] if e["kind"] == "face"]
    assert len(faces) == 2  # two people on camera, each one face identity
    texts = [n["text"].lower() for n in export["text_nodes"]]
    assert any("kitchen drawer" in t for t in texts)
    assert any("green tea" in t for t in texts)
    assert "Alice" in {e["name"] for e in export["entities"] if e["kind"] == "person"}


def test_replaying_again_resumes_and_adds_nothing(bag, replayed):
    memory_dir, first = replayed
    result = subprocess.run(
        ["m3", "replay", str(bag), "--memory", str(memory_dir), "--quiet"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    again = json.loads(result.stdout.splitlines()[-1])
    assert again["clips_stored"] == 0
    assert again["resumed_from_clip"] >= first["clips_stored"]


def test_unknown_parameter_in_yaml_is_refused(bag, tmp_path):
    params = yaml.safe_load(open(default_params_file()).read())
    params["perception_node"]["ros__parameters"]["face_rate"] = 5  # misspelt
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(params))
    result = subprocess.run(
        ["m3", "replay", str(bag), "--memory", str(tmp_path / "m"), "--params-file", str(bad), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 2
    assert "unknown perception_node parameter(s) ['face_rate']" in result.stderr


def test_eval_answers_the_episode_questions_through_the_action(bag, replayed, tmp_path):
    memory_dir, _ = replayed
    questions = bag.parent / "questions.json"
    episode_id = next(iter(json.loads(questions.read_text())))
    (tmp_path / "episodes" / episode_id).mkdir(parents=True)
    (tmp_path / "episodes" / episode_id / "memory").symlink_to(memory_dir)
    out = tmp_path / "results.jsonl"
    command = [
        "m3",
        "eval",
        "--annotations",
        str(questions),
        "--episodes",
        str(tmp_path / "episodes"),
        "--out",
        str(out),
        "--quiet",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["judge"] == "normalised-match" and summary["questions"] == 1
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["ground_truth"] == "kitchen drawer" and record["evidence"]
    assert record["verdict"] is ("kitchen drawer" in record["answer"].lower())
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)  # resumes: nothing asked again
    assert again.returncode == 0 and len(out.read_text().splitlines()) == 1
