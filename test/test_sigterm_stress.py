"""Issue 21: SIGTERM never crashes a node, whatever it is doing (reliability suite).

A CI run once saw memory_node end with SIGSEGV on SIGTERM right after it went active: rclpy's
Executor.shutdown in this Jazzy version does not wait for running callbacks, so run_node destroyed
the node (closing its store, freeing its models) under a MultiThreadedExecutor worker still inside a
callback. Two tests:
- a light node whose timer callback takes a second and uses what release() gives back: SIGTERM
  while it runs must let the callback end before release() (before the fix: released under it);
- the stress test: the three node commands, fed input on every topic, a goal stream and service
  calls, stopped with SIGTERM at random moments (during start-up and while callbacks run), several
  processes at once on a loaded machine: M3_SIGTERM_STOPS stops in all (default 200), 0 crashes.
Real processes, real DDS. The seed is printed; M3_SIGTERM_SEED replays a run.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import Image

from m3_interfaces.action import Instruct
from m3_interfaces.msg import AudioChunk, VoiceSegment
from m3_interfaces.srv import GetStats

pytestmark = pytest.mark.reliability

STOPS = int(os.environ.get("M3_SIGTERM_STOPS", "200"))
SEED = int(os.environ.get("M3_SIGTERM_SEED", str(random.SystemRandom().randrange(1 << 16))))
PARALLEL = 3  # processes starting or running at once: the machine is loaded on purpose
# Share of the stops per node command: perception loads its models for several seconds, the others in about one.
SHARES = {"perception_node": 0.05, "memory_node": 0.45, "control_node": 0.5}
DURING_START = 0.2  # share of the stops sent before the node is active (while it loads or configures)
ACTIVE = re.compile(r"\]: active$")
CRASH = re.compile(r"Traceback|Segmentation|core dumped|Fatal Python error|Aborted")
START_S = 120.0
STOP_S = 60.0

SLOW_CALLBACK_NODE = """
import sys, time
from m3_runtime.managed_node import ManagedNode, run_node

class SlowCallback(ManagedNode):
    def __init__(self):
        super().__init__("slow_callback")
        self.declare_parameter("autostart", True)

    def configure(self):
        self.store = {"open": True}

    def go_live(self):
        self.live(self.create_timer(0.05, self._tick))

    def _tick(self):
        print("callback start", flush=True)
        time.sleep(1.0)
        print("callback end" if self.store["open"] else "callback used a released store", flush=True)

    def release(self):
        self.store["open"] = False
        print("released", flush=True)

sys.exit(run_node(SlowCallback, "slow_callback", None, threads=2))
"""


def test_sigterm_during_a_callback_releases_only_after_it(tmp_path):
    script = tmp_path / "slow_callback.py"
    script.write_text(SLOW_CALLBACK_NODE)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "callback start", process.stderr.read()[-2000:]
        time.sleep(0.2)  # well inside the 1 s callback
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=STOP_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr[-3000:]
    assert "used" not in stdout, f"release() ran under a running callback:\n{stdout}"
    assert stdout.splitlines()[:2] == ["callback end", "released"], stdout
    assert not CRASH.search(stderr), stderr[-3000:]


class Feeder:
    """Input for every node at once, from this process: camera frames and audio for perception,
    voice segments and stats calls for memory, a stream of Instruct goals for control."""

    def __init__(self) -> None:
        self.node = Node("sigterm_feeder")
        self.images = self.node.create_publisher(Image, "/camera/image_raw", 10)
        self.audio = self.node.create_publisher(AudioChunk, "/audio", 50)
        self.voices = self.node.create_publisher(VoiceSegment, "/m3/voices", 50)
        self.stats = self.node.create_client(GetStats, "/m3/memory/get_stats")
        self.goals = ActionClient(self.node, Instruct, "/m3/instruct")
        self.rng = np.random.default_rng(SEED)
        self.tick = 0
        self.node.create_timer(0.05, self._feed)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.stop = threading.Event()

    def _spin(self) -> None:
        while not self.stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def _feed(self) -> None:
        self.tick += 1
        now = self.node.get_clock().now().to_msg()
        if self.tick % 4 == 0:  # 5 frames a second, as a camera at perception's face rate
            frame = Image(height=120, width=160, encoding="rgb8", step=480)
            frame.header.stamp = now
            frame.data = self.rng.integers(0, 255, 120 * 480, dtype=np.uint8).tobytes()
            self.images.publish(frame)
        chunk = AudioChunk(sample_rate=16000, channels=1, sample_format="S16LE", coding_format="wave")
        chunk.header.stamp = now
        chunk.data = (self.rng.normal(0, 3000, 800).astype(np.int16)).tobytes()  # 50 ms of loud noise
        self.audio.publish(chunk)
        segment = VoiceSegment(voice_id="voice_1", transcript="Alice put the keys on the table.", asr_confidence=0.9)
        segment.start, segment.end = Time(sec=100 + self.tick), Time(sec=101 + self.tick)
        segment.header.stamp, segment.embedding = segment.end, [0.6, 0.8]
        self.voices.publish(segment)
        if self.stats.service_is_ready():
            self.stats.call_async(GetStats.Request())
        if self.tick % 4 == 0 and self.goals.server_is_ready():
            self.goals.send_goal_async(Instruct.Goal(instruction="Where are the keys?", max_rounds=2))

    def __enter__(self) -> Feeder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.executor.shutdown()
        self.node.destroy_node()


def command(name: str, work: Path) -> list[str]:
    if name == "memory_node":
        return [name, "--ros-args", "-p", f"memory_dir:={work}", "-p", "memorize_drain_s:=5.0"]
    if name == "control_node":
        return [name, "--ros-args", "-p", "memory_timeout_s:=0.5"]
    return [name]


def stop_once(name: str, work: Path, rng: random.Random) -> dict:
    """Start the node command, SIGTERM it at a random moment, and say how it ended."""
    during_start = rng.random() < DURING_START
    delay = rng.uniform(0.0, 0.2 if during_start else 1.5)
    process = subprocess.Popen(command(name, work), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    running, active = threading.Event(), threading.Event()

    def read() -> None:
        for line in process.stderr:
            lines.append(line)
            running.set()
            if ACTIVE.search(line.rstrip()):
                active.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started = time.monotonic()
    # During start: from the node's first log line on (its command has set up its SIGTERM handling; before
    # that, while Python imports, SIGTERM ends the process as it ends any program, with nothing open yet).
    if not (running if during_start else active).wait(START_S):
        lines.append(f"TEST: {name} not {'running' if during_start else 'active'} after {START_S} s\n")
    time.sleep(delay)
    was_active = active.is_set()
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    reader.join(10)
    stderr = "".join(lines)
    crashed = process.returncode != 0 or bool(CRASH.search(stderr)) or "TEST:" in stderr
    return {
        "name": name,
        "active": was_active,
        "rc": process.returncode,
        "crashed": crashed,
        "stderr": stderr[-3000:] if crashed else "",
        "s": time.monotonic() - started,
        "stop_s": time.monotonic() - signalled,
    }


def test_sigterm_at_random_moments_never_crashes_a_node(tmp_path, reliability_counts):
    rng = random.Random(SEED)
    plan = [name for name, share in SHARES.items() for _ in range(max(1, round(STOPS * share)))]
    rng.shuffle(plan)
    print(f"{len(plan)} SIGTERM stops, seed {SEED} (M3_SIGTERM_SEED), {PARALLEL} processes at once")
    rclpy.init()
    started = time.monotonic()
    try:
        with Feeder(), ThreadPoolExecutor(PARALLEL) as pool:
            seeds = [rng.randrange(1 << 30) for _ in plan]
            jobs = [
                pool.submit(stop_once, name, tmp_path / f"{name}_{i}", random.Random(seed))
                for i, (name, seed) in enumerate(zip(plan, seeds, strict=True))
            ]
            results = [job.result() for job in jobs]
    finally:
        rclpy.try_shutdown()
    reliability_counts.tried(len(results))
    wall = time.monotonic() - started
    for name in SHARES:
        mine = [r for r in results if r["name"] == name]
        print(
            f"{name}: {len(mine)} stops ({sum(r['active'] for r in mine)} once active), "
            f"{sum(r['crashed'] for r in mine)} crashes, mean {np.mean([r['s'] for r in mine]):.1f} s per start+stop, "
            f"of which {np.mean([r['stop_s'] for r in mine]):.1f} s from SIGTERM to exit"
        )
    print(f"{len(results)} stops in {wall:.0f} s")
    crashes = [r for r in results if r["crashed"]]
    assert not crashes, "\n\n".join(f"{r['name']} rc {r['rc']}:\n{r['stderr']}" for r in crashes[:3])
    assert sum(r["active"] for r in results) >= len(results) // 2  # most stops hit a running node


@pytest.mark.reliability
def test_a_signal_during_executor_construction_waits_until_it_is_built():
    """SIGTERM inside MultiThreadedExecutor.__init__ left a half-built executor whose __del__ printed an
    AttributeError traceback (1 of 200 stops); run_node builds it with the stop signals deferred."""
    program = (
        "import os, signal, sys\n"
        "import rclpy\n"
        "from rclpy.executors import MultiThreadedExecutor\n"
        "from m3_runtime.managed_node import stop_on_sigterm\n"
        "from m3_runtime.node_shutdown import stop_signals_deferred\n"
        "stop_on_sigterm()\n"
        "rclpy.init()\n"
        "built = None\n"
        "try:\n"
        "    with stop_signals_deferred():\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        built = MultiThreadedExecutor(num_threads=2)\n"
        "    print('not stopped')\n"
        "except KeyboardInterrupt:\n"
        "    print('stopped after building' if built is not None else 'stopped while building')\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped after building", (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr


def _run_node_whose_configure(body: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    """A ManagedNode 'loading' brought up by run_node in a process of its own; `body`: its configure()."""
    program = (
        "import os, signal, sys\n"
        "from m3_runtime.managed_node import ManagedNode, run_node\n"
        "class Loading(ManagedNode):\n"
        "    def __init__(self):\n"
        "        super().__init__('loading')\n"
        "        self.declare_parameter('autostart', True)\n"
        "    def configure(self):\n"
        + "".join(f"        {line}\n" for line in body.splitlines())
        + "sys.exit(run_node(Loading, 'loading', None))\n"
    )
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=timeout_s)


@pytest.mark.reliability
def test_a_signal_while_configuring_that_a_library_turns_into_an_error_is_a_stop():
    """pybind11 turns a KeyboardInterrupt raised while it imports a module into ImportError("initialization
    failed"); a perception_node stopped so as its models loaded exited 2 "cannot configure" (1 of 200
    stops in CI). An error after the stop signal is the stop: exit 0."""
    done = _run_node_whose_configure(
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "except KeyboardInterrupt:\n"
        "    pass\n"
        "raise ImportError('initialization failed')"
    )
    assert done.returncode == 0, done.stderr
    assert "cannot start" not in done.stderr, done.stderr
    assert "[ERROR]" not in done.stderr, done.stderr  # the stop's doing, not a fault
    assert "configure cut short by SIGTERM: cannot configure: initialization failed" in done.stderr, done.stderr


@pytest.mark.reliability
def test_a_signal_that_a_library_swallows_while_configuring_still_stops_the_node():
    """A library that catches the KeyboardInterrupt inside an import and prints it went on loading; the
    perception_node then went active and never stopped (SIGKILLed by the stress test, 1 of 200 stops in
    CI). The stop still holds once configure returns: exit 0, not a node spinning on."""
    done = _run_node_whose_configure(
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "except KeyboardInterrupt:\n"
        "    print('swallowed by a library', file=sys.stderr)",
        timeout_s=30,
    )
    assert done.returncode == 0, done.stderr
    assert "swallowed by a library" in done.stderr, done.stderr
    assert "active" not in done.stderr, done.stderr


@pytest.mark.reliability
def test_a_configure_error_without_a_signal_still_fails_the_start():
    done = _run_node_whose_configure("raise ImportError('a real missing package')")
    assert done.returncode == 2, done.stderr
    assert "loading: error: cannot start: a real missing package" in done.stderr, done.stderr
