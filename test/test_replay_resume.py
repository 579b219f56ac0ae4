"""Issue 13: `m3 replay` killed with kill -9 at 10 random moments and resumed each time ends with the
same people as an uninterrupted replay: the same persons, names and face-voice equivalences.

Before perception's identity state was saved with the replay's progress, a resume restarted
perception cold in the middle of a scene: new face and voice ids for known people, persons
doubled, two "Carol"s. The moments are stream times drawn by a seeded RNG and printed; each run is
killed when its progress bar passes its moment, then the next run resumes (10 kills, then a run to
the end). Clips are 8 s here (30 s by default) so that a 32 s episode has 4 clips to resume into;
Whisper tiny.en (same names here as base) loads faster in each of the 12 runs.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from m3_agent.bringup import default_params_file
from m3_agent.demo.generate import generate
from m3_agent.recording.bag_reader import bag_info
from m3_agent.recording.video2bag import convert

EPISODE = Path(__file__).with_name("data") / "three_people_resume.yaml"
SEED = 13
MOMENTS = 10
PROGRESS = re.compile(r"(\d+(?:\.\d+)?)/\d+(?:\.\d+)? \[")
pytestmark = pytest.mark.reliability


@pytest.fixture(scope="module")
def episode(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("resume")
    generate(out, EPISODE)
    convert(out / "episode.mp4", out / "bag")
    params = yaml.safe_load(Path(default_params_file()).read_text())
    params["memory_node"]["ros__parameters"]["clip_seconds"] = 8.0
    params["perception_node"]["ros__parameters"]["asr_model"] = "tiny.en"  # 12 start-ups: the faster load
    (out / "params.yaml").write_text(yaml.safe_dump(params))
    return out / "bag", out / "params.yaml"


def _command(bag: Path, params: Path, memory: Path, quiet: bool) -> list[str]:
    return ["m3", "replay", str(bag), "--memory", str(memory), "--params-file", str(params)] + (
        ["--quiet"] if quiet else []
    )


def people(memory: Path) -> dict:
    """Persons (count), their names, and which faces and voices each person holds (equivalences)."""
    from m3_memory.store.sqlite_store import MemoryStore

    with closing(MemoryStore(str(memory), create=False)) as store:
        assert store.integrity_check() == []
        export = store.export_json()
    persons = [e for e in export["entities"] if e["kind"] == "person"]
    members: dict[str, list[str]] = {p["entity_id"]: [] for p in persons}
    for e in export["entities"]:
        if e["kind"] in ("face", "voice") and e["person_id"] in members:
            members[e["person_id"]].append(e["entity_id"])
    return {
        "persons": len(persons),
        "names": sorted(p["name"] for p in persons if p["name"]),
        "equivalences": sorted(sorted(ids) for ids in members.values() if len(ids) > 1),
        "clips": [c["clip_index"] for c in export["clips"]],
    }


def _kill_at(command: list[str], moment_s: float) -> str:
    """Run `command`, kill -9 it once its progress passes `moment_s` of stream time; its stderr."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err: list[str] = []

    def watch() -> None:
        buffer = ""
        while chunk := os.read(proc.stderr.fileno(), 4096).decode(errors="replace"):  # what is there, at once
            err.append(chunk)
            buffer = (buffer + chunk)[-400:]
            done = [float(n) for n in PROGRESS.findall(buffer)]
            if done and done[-1] >= moment_s and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                return

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    proc.wait(timeout=300)
    reader.join(timeout=10)
    assert proc.returncode == -signal.SIGKILL, f"the replay ended before {moment_s} s: {''.join(err)[-2000:]}"
    return "".join(err)


@pytest.fixture(scope="module")
def expected(episode, tmp_path_factory) -> dict:
    """The people of an uninterrupted replay."""
    bag, params = episode
    whole = tmp_path_factory.mktemp("uninterrupted") / "memory"
    done = subprocess.run(_command(bag, params, whole, True), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = people(whole)
    assert found["persons"] >= 3 and {"Alice", "Bob", "Carol"} <= set(found["names"])
    return found


def test_resume_after_kill9_at_random_moments_knows_the_same_people(episode, expected, tmp_path, reliability_counts):
    bag, params = episode
    duration = bag_info(bag).duration_s
    rng = random.Random(SEED)
    moments = sorted(round(rng.uniform(0.05, 0.95) * duration, 1) for _ in range(MOMENTS))
    print(f"kill -9 at stream seconds {moments} (seed {SEED})")
    memory = tmp_path / "resumed"
    snapshot_missing = []  # per resumed run: did it find no snapshot and start over?
    for moment in moments:
        err = _kill_at(_command(bag, params, memory, False), moment)
        assert "Traceback" not in err, err[-3000:]
        snapshot_missing.append("no usable perception snapshot" in err)
    last = subprocess.run(_command(bag, params, memory, True), capture_output=True, text=True, timeout=300)
    assert last.returncode == 0, last.stderr[-3000:]
    resumed = people(memory)
    reliability_counts.tried(MOMENTS)
    reliability_counts.lost(len(set(expected["clips"]) - set(resumed["clips"])))
    assert resumed == expected, f"kill -9 at {moments}"
    assert "no usable perception snapshot" not in last.stderr
    assert json.loads(last.stdout.splitlines()[-1])["snapshot_clip"] >= 0  # the last run resumed from a snapshot
    assert not any(snapshot_missing), snapshot_missing  # and so did every run before it


def test_unusable_snapshots_are_named_and_the_replay_starts_over_with_the_same_people(
    episode, expected, tmp_path, reliability_counts
):
    """Snapshots that are damaged or were made with other parameters are not used: each is named in
    a warning, and with none left the replay reads the recording from its start with cold perception,
    storing only the missing clips (never new identities for known people)."""
    bag, params = episode
    memory = tmp_path / "memory"
    _kill_at(_command(bag, params, memory, False), 0.6 * bag_info(bag).duration_s)
    snapshots = sorted((memory / "replay_snapshots").glob("clip_*.npz"))
    assert snapshots
    for k, path in enumerate(snapshots):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if k % 2 == 0 else b"not a snapshot")
    reliability_counts.tried(len(snapshots))
    done = subprocess.run(_command(bag, params, memory, True), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    candidates = [p for p in snapshots if int(p.stem.split("_")[1]) <= report["resumed_from_clip"]]
    assert candidates, "no snapshot at or before the first missing clip was tried"
    for path in candidates:  # each one a resume could use is named, newest first, then the start
        assert f"perception snapshot {path} is not usable" in done.stderr, done.stderr[-3000:]
    assert "no usable perception snapshot for clip" in done.stderr
    assert (report["snapshot_clip"], report["resumed_at_s"]) == (-1, 0.0)
    assert people(memory) == expected
