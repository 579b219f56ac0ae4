"""m3 replay with objects and text on (issue 23): a recording of a real photograph (scikit-image's coffee
cup) with a note pasted in goes through the same seeing logic as the perception node, and the memory
stores what the note says and that a cup was seen; with seeing off (the default) none of it."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from m3_agent.recording.video2bag import ConversionOptions, convert
from m3_agent.recording.video_writer import write_video

SECONDS, FPS = 6, 5
ON = ["perception_node.object_backend=yolov3_tiny", "perception_node.text_backend=rapidocr"]


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    from m3_perception.material.text_scenes import NOTE_SCENES, render_scene

    background, notes = NOTE_SCENES[0]  # coffee, "Meeting at 3 pm" / "Room 204, bring keys"
    frame = render_scene(background, notes, size=(640, 480)).frame
    out = tmp_path_factory.mktemp("replay_seeing")
    write_video(out / "episode.mp4", (frame for _ in range(SECONDS * FPS)), FPS, np.zeros(16000 * SECONDS, np.float32))
    convert(out / "episode.mp4", out / "bag", ConversionOptions())
    return out / "bag"


def replay_texts(bag, memory, *settings: str) -> tuple[dict, list[str]]:
    from m3_memory.store.sqlite_store import MemoryStore

    sets = [a for s in settings for a in ("--set", s)]
    result = subprocess.run(
        ["m3", "replay", str(bag), "--memory", str(memory), "--quiet", *sets],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    store = MemoryStore(str(memory), create=False)
    try:
        texts = [n["text"] for n in store.export_json()["text_nodes"]]
    finally:
        store.close()
    return json.loads(result.stdout.splitlines()[-1]), texts


def test_replay_remembers_what_the_note_says_and_the_cup(bag, tmp_path):
    report, texts = replay_texts(bag, tmp_path / "on", *ON)
    assert report["clips_stored"] == 1, report
    # the note's two lines, read in one keyframe, are one memory, read top to bottom
    assert 'A written note or sign says: "Meeting at 3 pm Room 204, bring keys"' in texts, texts
    assert "A cup is seen." in texts, texts


def test_replay_with_seeing_off_sees_no_objects(bag, tmp_path):
    report, texts = replay_texts(bag, tmp_path / "off")
    assert report["clips_stored"] == 0 and texts == [], (report, texts)  # nothing heard, no face: an empty clip
