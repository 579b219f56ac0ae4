"""`m3 replay` and `m3 eval` on a store that is damaged, empty or newer: one clear error line and
exit code 2, never a traceback, and the store left exactly as it was (never re-initialised)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from m3_agent.recording.video2bag import ConversionOptions, convert
from m3_agent.recording.video_writer import write_video
from m3_memory.graph.records import ClipEvidence, VoiceEvidence
from m3_memory.memory import Memory
from m3_memory.store.schema import SCHEMA_VERSION
from m3_memory.store.sqlite_store import DB_FILE, SCHEMA_FILE

S = 1_000_000_000


@pytest.fixture(scope="module")
def bag(tmp_path_factory) -> Path:
    """One second of grey video with a tone, as a rosbag2."""
    out = tmp_path_factory.mktemp("bag")
    t = np.arange(16000) / 16000
    frames = (np.full((120, 160, 3), 128, np.uint8) for _ in range(5))
    write_video(out / "clip.mp4", frames, 5, (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))
    convert(out / "clip.mp4", out / "bag", ConversionOptions(fps=5))
    return out / "bag"


@pytest.fixture(scope="module")
def healthy(tmp_path_factory) -> Path:
    """A store written by the memory: a few clips of speech."""
    path = tmp_path_factory.mktemp("healthy") / "memory"
    memory = Memory.open(str(path))
    try:
        for i in range(8):
            start = i * 30 * S
            voice = VoiceEvidence("voice_1", start + S, start + 3 * S, f"I put the keys in drawer {i}", 0.9, [], i)
            memory.ingest(ClipEvidence(i, start, start + 30 * S, [], [voice], []))
    finally:
        memory.close()
    return path


def damage(memory_dir: Path, how: str) -> None:
    db = memory_dir / DB_FILE
    if how == "zero length":
        db.write_bytes(b"")
    elif how == "flipped pages":  # bytes inside every page after the first (the schema page) flipped
        data = bytearray(db.read_bytes())
        page_size = int.from_bytes(data[16:18], "big")
        for start in range(page_size, len(data), page_size):
            for offset in range(start + 8, start + 40):
                data[offset] ^= 0xFF
        db.write_bytes(bytes(data))
    else:  # newer
        (memory_dir / SCHEMA_FILE).write_text(json.dumps({"format": "m3_memory", "schema_version": SCHEMA_VERSION + 1}))


def digest(memory_dir: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(memory_dir.iterdir())
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def run_m3(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(["m3", *args], capture_output=True, text=True, timeout=600, check=False)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


EXPECTED = {"zero length": "is empty (0 bytes)", "flipped pages": "is damaged", "newer": "newer than this program"}


@pytest.mark.parametrize("how", sorted(EXPECTED))
def test_replay_into_a_bad_store_is_one_clear_error(bag, healthy, tmp_path, how):
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    for item in healthy.iterdir():
        (memory_dir / item.name).write_bytes(item.read_bytes())
    damage(memory_dir, how)
    before = digest(memory_dir)
    result = run_m3("replay", str(bag), "--memory", str(memory_dir), "--quiet")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("m3 replay: error: memory store ") and EXPECTED[how] in last, result.stderr
    assert digest(memory_dir) == before


def test_eval_on_an_empty_store_stops_before_asking(tmp_path):
    """It used to open the zero-length file as a new, empty memory and score 0 % with exit code 0."""
    memory_dir = tmp_path / "episodes" / "kitchen_01" / "memory"
    memory_dir.mkdir(parents=True)
    (memory_dir / DB_FILE).write_bytes(b"")
    annotations = tmp_path / "robot.json"
    question = {"question_id": "kitchen_01_Q01", "question": "Where are the keys?", "answer": "drawer", "type": "x"}
    annotations.write_text(json.dumps({"kitchen_01": {"qa_list": [question]}}))
    out = tmp_path / "results.jsonl"
    result = run_m3(
        "eval", "--annotations", str(annotations), "--episodes", str(tmp_path / "episodes"), "--out", str(out)
    )
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("m3 eval: error: memory store ") and "is empty (0 bytes)" in last, result.stderr
    assert (memory_dir / DB_FILE).stat().st_size == 0 and not (memory_dir / SCHEMA_FILE).exists()
    assert not out.exists()
