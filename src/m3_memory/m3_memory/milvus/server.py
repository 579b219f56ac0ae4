"""Milvus Lite's gRPC server (`milvus-lite server`) as a child process: a one-machine Milvus for a
local `milvus_uri` and for the tests, which stand it in for a cluster.

milvus-lite 3.2.2 needs protobuf >= 5 and mediapipe (perception) needs protobuf < 5, so the server
lives in its own virtualenv that bootstrap.sh makes (~/.cache/m3-agent/milvus-lite-3.2.2); the
memory talks to it over gRPC with pymilvus 2.5, which runs on the main venv's protobuf 4.
The server ends with the process that started it, even on SIGKILL (child_processes.popen_tied).
It runs through lite_launcher.py, by the interpreter of the `milvus-lite` program, so that a kill while
it writes an index file does not leave a collection that no longer loads.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import socket
import subprocess
import time

from m3_runtime.child_processes import popen_tied

MILVUS_LITE_VERSION = "3.2.2"
DEFAULT_COMMAND = os.path.expanduser(f"~/.cache/m3-agent/milvus-lite-{MILVUS_LITE_VERSION}/bin/milvus-lite")


def milvus_lite_command() -> str:
    """The `milvus-lite` program: $M3_MILVUS_LITE, bootstrap.sh's venv, or one on PATH."""
    for candidate in (os.environ.get("M3_MILVUS_LITE", ""), DEFAULT_COMMAND, shutil.which("milvus-lite") or ""):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(
        "the milvus-lite server is not installed: run `bash bootstrap.sh setup` (it installs milvus-lite "
        f"{MILVUS_LITE_VERSION} into {os.path.dirname(os.path.dirname(DEFAULT_COMMAND))}) or set M3_MILVUS_LITE"
    )


LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lite_launcher.py")


def server_command() -> list[str]:
    """`milvus-lite` through lite_launcher.py: the program's own interpreter (its #! line) runs the launcher."""
    program = milvus_lite_command()
    with open(program, "rb") as file:
        first = file.readline(4096).decode("utf-8", "replace").strip()
    if not first.startswith("#!"):
        raise RuntimeError(f"{program} is not a Python console script (no #! line): cannot run lite_launcher.py")
    return [*shlex.split(first[2:]), LAUNCHER]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class MilvusLiteServer:
    """One `milvus-lite server` process on host:port (127.0.0.1 unless told; 0.0.0.0 for a fleet on several
    machines) serving data_dir; start() waits until it listens."""

    def __init__(self, data_dir: str, port: int = 0, log_path: str | None = None, host: str = "127.0.0.1") -> None:
        self.data_dir = os.path.abspath(os.path.expanduser(data_dir))
        self.host = host
        self.port = port or free_port()
        self.log_path = log_path or self.data_dir.rstrip("/") + ".server.log"
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://{self._reach}:{self.port}"

    @property
    def _reach(self) -> str:
        """The address this machine reaches the server at."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host

    def start(self, timeout_s: float = 60.0) -> MilvusLiteServer:
        os.makedirs(os.path.dirname(self.data_dir) or ".", exist_ok=True)
        command = [*server_command(), "server", "--data-dir", self.data_dir, "--host", self.host]
        with open(self.log_path, "ab") as log:
            self.process = popen_tied(
                [*command, "--port", str(self.port), "--max-workers", "8"],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a terminal's Ctrl-C reaches us only: the memory flushes, then stops it
            )
        atexit.register(self.stop)  # a program that dies of an exception does not leave its server behind
        deadline = time.monotonic() + timeout_s
        while not port_open(self.port, self._reach):
            if self.process.poll() is not None:
                raise RuntimeError(f"milvus-lite server exited with {self.process.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"milvus-lite server did not listen on port {self.port} in {timeout_s:.0f} s")
            time.sleep(0.1)
        return self

    def stop(self, kill: bool = False) -> None:
        """Stop the server (kill=True: SIGKILL, as a crash or a lost machine would)."""
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
