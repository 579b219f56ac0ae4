"""Issue 21, D2 and D5: a bad parameter value or type, or a misspelt parameter name, given by `--set`, a
params file or `--ros-args -p`, is "cannot configure: <why>" (the closest known name for a typo) and exit
status 2 from `m3 run`, `m3 node`, `m3 replay`, `m3 eval`, `m3 demo` and the node commands - never a
traceback, never silently ignored, and nothing created (no store under ~/.m3). An integer where a float is
declared is accepted. Real commands, run as subprocesses with HOME pointing at an empty directory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from m3_agent.bringup import default_params_file
from m3_runtime.parameter_checks import ParameterError, checked_value, section_problems, unknown_name_problem

pytestmark = pytest.mark.reliability
TYPO = "cannot configure: unknown parameter 'memroy_dir' (did you mean 'memory_dir'?)"
RANGE = "cannot configure: parameter 'clip_seconds' = 0.0 is out of range [1.0, 3600.0]"


def _run(command: list[str], home: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def _refused(result: subprocess.CompletedProcess, why: str, home: Path, *absent: Path) -> None:
    """Exit 2 with the reason, no traceback, and no store created (the default one or a named one)."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert why in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    for path in (home / ".m3", *absent):
        assert not path.exists(), f"{path} was created"


def _params_file(tmp_path: Path, **memory: object) -> Path:
    params = yaml.safe_load(Path(default_params_file()).read_text())
    params["memory_node"]["ros__parameters"].update(memory)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


CHECK = ["m3", "run", "--check", "--nodes", "memory_node", "--llm", "none"]


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ("memory_node.clip_seconds=0.0", RANGE),
        ("memory_node.clip_seconds=abc", "cannot configure: parameter 'clip_seconds' must be a float, got string"),
        ("perception_node.max_image_pixels=-1", "cannot configure: parameter 'max_image_pixels' = -1 is out of range"),
        ("memory_node.memroy_dir={dir}", TYPO),
        ("control_node.temprature=0.2", "unknown parameter 'temprature' (did you mean 'temperature'?)"),
    ],
)
def test_a_bad_set_is_refused_before_anything_starts(tmp_path, setting, why):
    store = tmp_path / "store"
    result = _run([*CHECK, "--set", setting.format(dir=store)], tmp_path)
    _refused(result, why, tmp_path, store)


def test_a_bad_params_file_is_refused(tmp_path):
    _refused(_run([*CHECK, "--params-file", str(_params_file(tmp_path, clip_seconds=0.0))], tmp_path), RANGE, tmp_path)
    store = tmp_path / "store"
    typo = _params_file(tmp_path, memroy_dir=str(store))
    _refused(_run([*CHECK, "--params-file", str(typo)], tmp_path), TYPO, tmp_path, store)


def test_an_integer_is_accepted_for_a_float(tmp_path):
    """`--set memory_node.clip_seconds=30` crashed (rclpy: an int for a DOUBLE parameter); a params file too."""
    store = tmp_path / "store"
    result = _run(
        [*CHECK, "--set", "memory_node.clip_seconds=30", "--set", f"memory_node.memory_dir={store}"], tmp_path
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "clips of 30.0 s" in result.stderr and "1 node(s) up" in result.stderr
    params = _params_file(tmp_path, clip_seconds=20, memory_dir=str(store))
    result = _run([*CHECK, "--params-file", str(params), "--set", "control_node.temperature=1"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "clips of 20.0 s" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["m3", "node", "memory", "--llm", "none", "--set", "memory_node.memroy_dir={dir}"],
        ["m3", "node", "memory", "--llm", "none", "--ros-args", "-p", "memroy_dir:={dir}"],
        ["memory_node", "--ros-args", "-p", "memroy_dir:={dir}"],
        ["memory_node", "--ros-args", "-p", "autostart:=true", "-p", "memroy_dir:={dir}"],
    ],
    ids=["m3-node-set", "m3-node-ros-args", "memory_node", "memory_node-autostart"],
)
def test_a_misspelt_name_for_one_node_is_refused(tmp_path, command):
    store = tmp_path / "store"
    result = _run([part.format(dir=store) for part in command], tmp_path)
    _refused(result, TYPO, tmp_path, store)


@pytest.mark.parametrize(
    ("command", "why"),
    [
        (["memory_node", "--ros-args", "-p", "clip_seconds:=0.0"], RANGE),
        (["memory_node", "--ros-args", "-p", "clip_seconds:=abc"], "cannot configure: parameter 'clip_seconds' must"),
        (["perception_node", "--ros-args", "-p", "max_image_pixels:=-1"], "'max_image_pixels' = -1 is out of range"),
        (["control_node", "--ros-args", "-p", "top_p:=2"], "cannot configure: parameter 'top_p' = 2.0 is out of range"),
    ],
    ids=["memory-range", "memory-type", "perception-range", "control-range"],
)
def test_a_bad_value_for_a_node_command_is_refused(tmp_path, command, why):
    _refused(_run(command, tmp_path), why, tmp_path)


OFFLINE = {  # the commands that read node parameters without running the nodes' own checks
    "replay": ["m3", "replay", "{bag}", "--memory", "{dir}", "--llm", "none"],
    "eval": ["m3", "eval", "--annotations", "{bag}.json", "--episodes", "{dir}", "--llm", "none"],
    "demo": ["m3", "demo", "--out", "{dir}", "--llm", "none"],
}


@pytest.mark.parametrize("name", sorted(OFFLINE))
@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ("memory_node.clip_seconds=0.0", RANGE),
        ("perception_node.face_rate_hz=fast", "cannot configure: parameter 'face_rate_hz' must be a float, got string"),
        ("control_node.temprature=0.2", "unknown parameter 'temprature' (did you mean 'temperature'?)"),
    ],
    ids=["range", "type", "typo"],
)
def test_offline_commands_refuse_a_bad_set_as_m3_run_does(tmp_path, name, setting, why):
    """m3 replay / eval / demo: a bad --set is "<node>: cannot configure: <why>", exit 2, before a recording is
    read or a memory directory made (the bag here does not exist: reading it first would be another error)."""
    out = tmp_path / "out"
    command = [part.format(bag=tmp_path / "missing", dir=out) for part in OFFLINE[name]]
    result = _run([*command, "--set", setting], tmp_path)
    _refused(result, why, tmp_path, out)
    assert f"m3 {name}: error: " in result.stderr, result.stderr[-2000:]


def test_replay_checks_its_params_file_and_accepts_an_integer_for_a_float(tmp_path):
    store = tmp_path / "store"
    replay = [part.format(bag=tmp_path / "missing", dir=store) for part in OFFLINE["replay"]]
    result = _run([*replay, "--params-file", str(_params_file(tmp_path, memroy_dir="/tmp/x"))], tmp_path)
    _refused(result, TYPO, tmp_path, store)
    result = _run(
        [*replay, "--set", "memory_node.clip_seconds=30", "--set", "perception_node.face_rate_hz=2"], tmp_path
    )
    assert "cannot configure" not in result.stderr, result.stderr[-2000:]  # past the check: the missing recording
    assert "recording not found" in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]


def test_the_checks_themselves():
    """The pure checks every node and the bring-up share."""
    from m3_memory.node_parameters import PARAMETERS

    assert checked_value("clip_seconds", 30, PARAMETERS["clip_seconds"]) == 30.0
    assert isinstance(checked_value("clip_seconds", 30, PARAMETERS["clip_seconds"]), float)
    for bad in (True, "30", 0.5, [30.0]):
        with pytest.raises(ParameterError):
            checked_value("clip_seconds", bad, PARAMETERS["clip_seconds"])
    with pytest.raises(ParameterError, match=r"must be an integer, got float 1\.0"):
        checked_value("fleet_slot", 1.0, PARAMETERS["fleet_slot"])
    assert checked_value("fleet_slot", 999, PARAMETERS["fleet_slot"]) == 999  # the ends are in range
    assert unknown_name_problem("memroy_dir", PARAMETERS) == TYPO.removeprefix("cannot configure: ")
    assert unknown_name_problem("zzzz", PARAMETERS) == "unknown parameter 'zzzz'"
    assert (
        section_problems({"use_sim_time": True, "qos_overrides./clock.depth": 5, "clip_seconds": 2}, PARAMETERS) == []
    )
