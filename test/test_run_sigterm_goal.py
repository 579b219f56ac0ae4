"""Issue 21: SIGTERM to `m3 run` while the control node runs a goal stops it as `control_node` alone stops:
the goal ends and is answered, then the nodes go, exit status 0, no traceback.

Before, `m3 run` installed rclpy's signal handlers, which shut the context down at the signal under the
running goal: "context is invalid", a Traceback from the action server, and a client never answered.
Real processes, real DDS: `m3 run` with memory and control, `m3 ask --json` as the client. The goal waits
on memory services that do not exist (memory_prefix elsewhere), so it is surely running at the signal.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import pytest

START_S = 120.0  # start-up on a loaded 2-core machine
MEMORY_WAIT_S = 4.0  # how long the goal waits for the missing memory service


class Lines:
    """A process's stderr read line by line on a thread; wait_for(text) waits until a line has it."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: any(text in line for line in self.lines), timeout_s)

    def text(self) -> str:
        self._thread.join(10)
        return "".join(self.lines)


def test_sigterm_during_a_goal_answers_it_and_exits_cleanly(tmp_path):
    settings = {
        "memory_node.memory_dir": tmp_path / "memory",
        "control_node.memory_prefix": "nowhere",
        "control_node.memory_timeout_s": MEMORY_WAIT_S,
    }
    run = subprocess.Popen(
        ["m3", "run", "--nodes", "memory_node", "control_node", "--memory-transport", "service"]
        + [part for name, value in settings.items() for part in ("--set", f"{name}={value}")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ask = None
    try:
        log = Lines(run)
        if not log.wait_for("[control_node]: active", START_S):
            pytest.fail(f"control_node not active after {START_S} s: {''.join(log.lines)[-2000:]}")
        ask = subprocess.Popen(
            ["m3", "ask", "--json", "--wait", "30", "--timeout", "60", "Where are the keys?"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert log.wait_for("goal received", 60), "".join(log.lines)[-2000:]
        time.sleep(0.5)  # well inside the goal's wait for memory
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
        answer, ask_err = ask.communicate(timeout=60)
    finally:
        for process in (run, ask):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()
    stderr = log.text()
    assert run.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "context is invalid" not in stderr, stderr[-3000:]
    assert "goal ended" in stderr, stderr[-3000:]  # it ended in the node, not under a dead context
    result = json.loads(answer.splitlines()[-1])  # the client got the goal's result, not a timeout
    assert result["error_name"] in ("MEMORY_UNAVAILABLE", "PREEMPTED"), (answer, ask_err)
