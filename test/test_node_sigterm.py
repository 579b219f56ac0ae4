"""SIGTERM (what systemd, docker stop and launch send) stops every node command and `m3 run` as Ctrl-C
does: exit status 0, and the memory node stores the clip still open and closes its store (WAL
checkpointed) instead of dying with it. Also while the nodes are still loading their models: rclpy's
own handler used to invalidate the context under the start-up, which then failed ("context is
invalid", exit 1 or 2). Real processes, real DDS, a real store on disk."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import rclpy
from builtin_interfaces.msg import Time
from rclpy.node import Node

from m3_interfaces.msg import VoiceSegment
from m3_interfaces.srv import GetStats

START_S = 120.0  # model loading on a loaded 2-core machine
# Printed by the face detector (MediaPipe) as perception starts loading its models, seconds before it is up.
LOADING_MARK = "XNNPACK"


def wait_until(node: Node, predicate, process: subprocess.Popen, timeout_s: float = START_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert process.poll() is None, f"{process.args[0]} exited early: {process.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, "timed out"
        rclpy.spin_once(node, timeout_sec=0.1)


@pytest.fixture
def probe():
    rclpy.init()
    node = Node("sigterm_probe")
    yield node
    node.destroy_node()
    rclpy.try_shutdown()


def terminate(process: subprocess.Popen) -> tuple[int, str]:
    """SIGTERM, then the exit status and stderr; SIGKILL (a failure) if it is still up after 60 s."""
    process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        pytest.fail(f"{process.args[:2]} still running 60 s after SIGTERM: {stderr[-2000:]}")
    return process.returncode, stderr


def open_clip_then_sigterm(probe: Node, command: list[str], memory_dir: Path) -> tuple[int, str]:
    """Start a process serving the memory node, give it one utterance (an open clip), SIGTERM it."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        voices = probe.create_publisher(VoiceSegment, "/m3/voices", 10)
        stats = probe.create_client(GetStats, "/m3/memory/get_stats")
        wait_until(probe, lambda: stats.service_is_ready() and voices.get_subscription_count() > 0, process)
        msg = VoiceSegment(voice_id="voice_1", transcript="Alice put the keys on the table.", asr_confidence=0.9)
        msg.start, msg.end = Time(sec=100), Time(sec=102)
        msg.header.stamp, msg.embedding = msg.end, [0.6, 0.8]
        voices.publish(msg)
        time.sleep(2.0)  # reliable delivery on localhost; the clip (30 s) stays open
    except BaseException:
        process.kill()
        process.communicate()
        raise
    return terminate(process)


def assert_store_closed_with_the_clip(memory_dir: Path) -> None:
    assert not (memory_dir / "memory.sqlite3-wal").exists(), "store not closed: its WAL is still there"
    check = subprocess.run(["m3", "memory", "check", str(memory_dir)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    stats = subprocess.run(["m3", "memory", "stats", str(memory_dir)], capture_output=True, text=True, check=False)
    assert json.loads(stats.stdout.splitlines()[-1])["clips"] == 1, stats.stdout  # the open clip was stored


def test_sigterm_stops_memory_node_with_its_store_closed(probe, tmp_path):
    memory_dir = tmp_path / "memory"
    command = ["memory_node", "--ros-args", "-p", f"memory_dir:={memory_dir}", "-p", "memorize_drain_s:=30.0"]
    code, stderr = open_clip_then_sigterm(probe, command, memory_dir)
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert_store_closed_with_the_clip(memory_dir)


def test_sigterm_stops_m3_run_with_its_nodes_shut_down(probe, tmp_path):
    memory_dir = tmp_path / "memory"
    command = ["m3", "run", "--nodes", "memory_node", "control_node"]
    command += ["--set", f"memory_node.memory_dir={memory_dir}", "--set", "memory_node.memorize_drain_s=30.0"]
    code, stderr = open_clip_then_sigterm(probe, command, memory_dir)
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert_store_closed_with_the_clip(memory_dir)


def test_sigterm_stops_perception_node(probe):
    process = subprocess.Popen(["perception_node"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(probe, lambda: probe.count_subscribers("/audio") > 0, process)
    code, stderr = terminate(process)
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "frames received" in stderr  # release() ran: the workers were stopped and their counts logged


def sigterm_while_loading(command: list[str]) -> tuple[int, str]:
    """Start the command, SIGTERM it as soon as perception starts loading its models; status and stderr."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    loading = threading.Event()

    def read() -> None:
        for line in process.stderr:
            lines.append(line)
            if LOADING_MARK in line:
                loading.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not loading.wait(START_S):
        process.kill()
        pytest.fail(f"no {LOADING_MARK!r} line from {command[:2]}: {''.join(lines)[-2000:]}")
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"{command[:2]} still running 60 s after SIGTERM")
    reader.join(timeout=10)
    return process.returncode, "".join(lines)


def test_sigterm_while_perception_node_loads_its_models():
    code, stderr = sigterm_while_loading(["perception_node"])
    assert code == 0, stderr[-3000:]
    assert "context is invalid" not in stderr and "cannot start" not in stderr, stderr[-3000:]


def test_sigterm_while_m3_run_starts(tmp_path):
    memory_dir = tmp_path / "memory"
    command = [
        "m3",
        "run",
        "--nodes",
        "perception_node",
        "memory_node",
        "--set",
        f"memory_node.memory_dir={memory_dir}",
    ]
    code, stderr = sigterm_while_loading(command)
    assert code == 0, stderr[-3000:]
    assert "error" not in stderr.lower() and "Traceback" not in stderr, stderr[-3000:]
