"""Issue 21, D1: child processes die with their parent, even on kill -9, and the long-running commands
end cleanly on SIGTERM (reliability suite).

Before: after `kill -9` (or SIGTERM) of `m3 replay`, or `kill -9` of `perception_node`, the
speech-to-text worker (~420 MB) and the multiprocessing resource tracker kept running with parent
PID 1, and SIGTERM ended `m3 replay` with status 143, no JSON line. Real processes throughout: the
commands on a small generated recording, the Milvus Lite server, the llama.cpp server's spawn path.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.reliability

START_S = 180.0  # model loading on a loaded 2-core machine
GONE_S = 10.0
ASR_WORKER = "multiprocessing.spawn"  # the speech-to-text worker's command line (spawn_main)
PROGRESS = re.compile(r"(\d+(?:\.\d+)?)/\d+(?:\.\d+)? \[")


# -- processes, from /proc ---------------------------------------------------------------------------------
def _stat(pid: int) -> tuple[str, int, str] | None:
    """(state, parent pid, start time) of a process, None when there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), fields[19]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> dict[int, tuple[str, str]]:
    """Every process under `root`: pid -> (start time, command line)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[1], []).append(int(entry))
    found: dict[int, tuple[str, str]] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if (stat := _stat(pid)) is not None:
            found[pid] = (stat[2], _cmdline(pid))
            todo += children.get(pid, [])
    return found


def still_running(processes: dict[int, tuple[str, str]]) -> dict[int, str]:
    """Those of `processes` still running (not the same pid reused, not a zombie): pid -> command line."""
    alive = {}
    for pid, (started, cmdline) in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == started and stat[0] != "Z":
            alive[pid] = cmdline
    return alive


def wait_for_descendant(process: subprocess.Popen, mark: str, timeout_s: float = START_S) -> dict:
    """Wait until a process under `process` has `mark` in its command line; all its descendants then."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = descendants(process.pid)
        if any(mark in cmdline for _, cmdline in found.values()):
            return found
        assert process.poll() is None, f"{process.args[:2]} exited with {process.returncode} before its {mark}"
        time.sleep(0.2)
    pytest.fail(f"no {mark} under {process.args[:2]} after {timeout_s} s")


def assert_gone(processes: dict[int, tuple[str, str]], timeout_s: float = GONE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while (alive := still_running(processes)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)  # do not leak them into the rest of the run
    assert not alive, f"still running {timeout_s} s after their parent went: {alive}"


def kill9(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


# -- a small recording -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bag(tmp_path_factory) -> Path:
    """120 s of 5 fps camera frames and noisy audio with tone bursts, as m3 video2bag writes them."""
    from rosbags.rosbag2 import Writer

    from m3_agent.recording.typestore import AUDIO_CHUNK, COMPRESSED_IMAGE, m3_typestore
    from m3_runtime.image_codec import encode_jpeg

    store = m3_typestore()
    types = store.types
    rng = np.random.default_rng(21)
    path = tmp_path_factory.mktemp("d1") / "bag"

    def header(t: float):
        stamp = types["builtin_interfaces/msg/Time"](sec=int(t), nanosec=round(t % 1 * 1e9))
        return types["std_msgs/msg/Header"](stamp=stamp, frame_id="")

    jpeg = np.frombuffer(encode_jpeg(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8), 80), np.uint8)
    with Writer(path, version=9) as writer:
        image = writer.add_connection("/camera/image_raw/compressed", COMPRESSED_IMAGE, typestore=store)
        audio = writer.add_connection("/audio", AUDIO_CHUNK, typestore=store)
        for i in range(1200):  # 0.1 s audio chunks; a 1 s tone every 4 s, as if someone spoke
            t = i / 10
            samples = rng.normal(0, 200, 1600)
            if int(t) % 4 == 0:
                samples += 6000 * np.sin(2 * np.pi * 220 * (t + np.arange(1600) / 16000))
            data = np.frombuffer(samples.astype(np.int16).tobytes(), np.uint8)
            msg = types[AUDIO_CHUNK](header(t), 16000, 1, "S16LE", "wave", data)
            writer.write(audio, round(t * 1e9), store.serialize_cdr(msg, AUDIO_CHUNK))
            if i % 2 == 0:
                frame = types[COMPRESSED_IMAGE](header(t), "jpeg", jpeg)
                writer.write(image, round(t * 1e9), store.serialize_cdr(frame, COMPRESSED_IMAGE))
    return path


def replay_command(bag: Path, memory: Path, quiet: bool = True) -> list[str]:
    return ["m3", "replay", str(bag), "--memory", str(memory), "--llm", "none"] + (["--quiet"] if quiet else [])


# -- the tests ---------------------------------------------------------------------------------------------
def test_kill9_of_m3_replay_takes_its_children_along(bag, tmp_path):
    process = subprocess.Popen(replay_command(bag, tmp_path / "memory"), stdout=subprocess.DEVNULL)
    children = wait_for_descendant(process, ASR_WORKER)
    time.sleep(1.0)  # the worker's initializer has run
    kill9(process)
    assert_gone(children)


def test_kill9_of_perception_node_takes_its_asr_worker_along():
    process = subprocess.Popen(["perception_node"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children = wait_for_descendant(process, ASR_WORKER)
    time.sleep(1.0)
    kill9(process)
    assert_gone(children)


def _sigterm(process: subprocess.Popen) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        kill9(process)
        pytest.fail(f"{process.args[:2]} still running 120 s after SIGTERM")


def test_sigterm_of_m3_replay_while_it_loads_ends_cleanly(bag, tmp_path):
    process = subprocess.Popen(
        replay_command(bag, tmp_path / "memory"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    children = wait_for_descendant(process, ASR_WORKER)
    stdout, stderr = _sigterm(process)
    assert process.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert json.loads(stdout.splitlines()[-1])["stopped"] == "sigterm", stdout
    assert_gone(children)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_sigterm_of_m3_replay_mid_recording_stores_and_says_where(bag, tmp_path, sig):
    memory = tmp_path / "memory"
    process = subprocess.Popen(  # its own process group: Ctrl-C in a terminal signals the whole group
        replay_command(bag, memory, quiet=False),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    progressed = threading.Event()
    errors: list[str] = []

    def watch() -> None:  # tqdm redraws its bar with \r: read characters, not lines
        while chunk := process.stderr.read(64):
            errors.append(chunk)
            moments = PROGRESS.findall("".join(errors)[-200:])
            if moments and float(moments[-1]) >= 5.0:
                progressed.set()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        assert progressed.wait(START_S), "".join(errors)[-2000:]
        children = descendants(process.pid)
        if sig == signal.SIGINT:
            os.killpg(process.pid, sig)  # as Ctrl-C: the speech-to-text worker gets it too
        else:
            process.send_signal(sig)  # as kill, docker stop, systemd
        stdout = process.stdout.read()
        process.wait(120)
    finally:
        if process.poll() is None:
            kill9(process)
    reader.join(10)
    stderr = "".join(errors)
    assert process.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    report = json.loads(stdout.splitlines()[-1])
    assert report["stopped"] == sig.name.lower() and 5.0 <= report["read_until_s"] < 120.0, report
    assert not (memory / "memory.sqlite3-wal").exists(), "the store was not closed"
    check = subprocess.run(["m3", "memory", "check", str(memory)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert_gone(children)


def test_sigterm_of_m3_play_says_where_it_stopped(bag):
    process = subprocess.Popen(
        ["m3", "play", str(bag), "--rate", "1", "--wait-for-subscribers", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(8.0)  # start-up, then a few seconds of the recording
    stdout, stderr = _sigterm(process)
    assert process.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    report = json.loads(stdout.splitlines()[-1])
    assert report["stopped"] == "sigterm" and 0 < report["read_until_s"] < 120.0 and report["published"] > 0, report


# Parents that start a child the way the suite does, from a thread that then ends, and wait to be killed.
TIED_SLEEP = """
import threading, time
from m3_runtime.child_processes import popen_tied
child = {}
starter = threading.Thread(target=lambda: child.setdefault("p", popen_tied(["sleep", "300"])))
starter.start()
starter.join()  # PR_SET_PDEATHSIG follows the thread that forked: this one is gone now
print(child["p"].pid, flush=True)
time.sleep(300)
"""
MILVUS_LITE = """
import sys, threading, time
from m3_memory.milvus.server import MilvusLiteServer
server = MilvusLiteServer(sys.argv[1])
starter = threading.Thread(target=server.start)
starter.start()
starter.join()
print(server.process.pid, flush=True)
time.sleep(300)
"""
LLAMA_SERVER = """
import sys, threading, time
from pathlib import Path
from m3_agent.llm.server import LlamaServer, ServerConfig, free_port
fake = (  # answers /v1/models as a llama.cpp server would, on the --port it is given
    "import sys, json, http.server as h\\n"
    "port = int(sys.argv[sys.argv.index('--port') + 1])\\n"
    "class Models(h.BaseHTTPRequestHandler):\\n"
    "    def do_GET(self):\\n"
    "        self.send_response(200); self.end_headers(); self.wfile.write(b'{\\"data\\": [{\\"id\\": \\"m\\"}]}')\\n"
    "    def log_message(self, *args): pass\\n"
    "h.HTTPServer(('127.0.0.1', port), Models).serve_forever()\\n"
)
config = ServerConfig(Path("model.gguf"), "m", port=free_port(), command=[sys.executable, "-c", fake],
                      log_file=Path(sys.argv[1]) / "server.log")
server = LlamaServer(config)
starter = threading.Thread(target=server.start)
starter.start()
starter.join()
print(server.pid, flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("script", [TIED_SLEEP, MILVUS_LITE, LLAMA_SERVER], ids=["popen_tied", "milvus", "llama"])
def test_kill9_of_a_parent_takes_its_server_along(script, tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "data")], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), parent.stderr.read().decode()[-3000:]
        child = int(line)
        time.sleep(1.0)  # the thread that started it has ended (or is waiting): the child must still run
        children = descendants(parent.pid)
        assert child in still_running(children), f"{_cmdline(child)!r} died with the thread that started it"
    finally:
        kill9(parent)
    assert_gone(children)
