"""llama.cpp's own OpenAI-compatible server (llama-server, built by set-up) as a child process.

start() reuses a server already answering on the port when it serves the same model name, and
otherwise starts one, logging to a file, and waits until /v1/models answers; a server that exits
or stays silent is a ServerError carrying the tail of its log. stop() ends only a server this
object started (SIGTERM to its process group, then SIGKILL); it is also registered with atexit,
and the child asks the kernel to be terminated if this process dies without stopping it.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from m3_agent.llm.models import FIX
from m3_runtime.verified_files import cache_dir

SERVER_BINARY = "llama-server"
LOG_TAIL_LINES = 25


class ServerError(RuntimeError):
    """The model server cannot be used: not installed, port taken, exited or silent during start-up."""


@dataclass
class ServerConfig:
    model_path: Path
    model: str  # the name the server answers to (--model_alias) and clients send
    host: str = "127.0.0.1"
    port: int = 8080
    threads: int = 0  # generation threads; 0: every core but one (at least 1), see generation_threads
    threads_batch: int = 0  # prompt-reading threads; 0: every core
    context: int = 8192  # tokens
    prompt_cache_mb: int = 1024  # llama.cpp RAM cache of evaluated prompts; 0: off
    start_timeout_s: float = 180.0
    log_file: Path | None = None  # None: ~/.cache/m3-agent/logs/llama-server-<port>.log
    extra_args: list[str] = field(default_factory=list)  # more llama-server flags, e.g. --n-gpu-layers 99
    command: list[str] = field(default_factory=list)  # empty: [server_binary()]; else the server's command

    def argv(self) -> list[str]:
        threads = str(self.threads or generation_threads(os.cpu_count() or 1))
        threads_batch = str(self.threads_batch or os.cpu_count() or 1)
        return [
            *(self.command or [str(server_binary())]),
            *("--model", str(self.model_path), "--alias", self.model),
            *("--host", self.host, "--port", str(self.port)),
            *("--threads", threads, "--threads-batch", threads_batch, "--ctx-size", str(self.context)),
            # One request at a time: the memorizer, the fact reader and the reasoner queue rather than
            # split the context and the cores (and a streamed answer is never cut by another request).
            *("--parallel", "1"),
            # Evaluated prompts kept in RAM (the memorizer's, the reasoner's and the fact reader's), in MiB.
            *("--cache-ram", str(self.prompt_cache_mb)),
            *("--load-mode", "none"),  # read the weights into memory: mmap made the first calls slow here
            "--no-webui",
            *self.extra_args,
        ]


def is_program(path: Path) -> bool:
    """An executable file (a llama-server someone can start), not a directory or a plain file."""
    return path.is_file() and os.access(path, os.X_OK)


def server_binary() -> Path:
    """The llama-server set-up links into this interpreter's environment (bin/llama-server), else one on PATH."""
    beside = Path(sys.executable).parent / SERVER_BINARY
    if is_program(beside):
        return beside
    found = shutil.which(SERVER_BINARY)
    if found is None:
        raise ServerError(
            f"llama.cpp's {SERVER_BINARY} is not installed (not in {beside.parent}, not on PATH); run `{FIX}`, "
            "or set embedded.server in the LLM profile to a llama-server binary"
        )
    return Path(found)


def generation_threads(cores: int) -> int:
    """Every core but one: the server shares the machine with perception and the nodes, and
    llama.cpp's threads meet at a barrier after every layer of every generated token, so one thread
    preempted by perception stalls them all (on 2 cores with perception running, generation fell
    from 30 to 1.5-3 tokens/s with 2 threads)."""
    return max(1, cores - 1)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def served_models(base_url: str, timeout_s: float = 3.0, api_key: str = "") -> list[str] | None:
    """The model ids /v1/models lists; None when nothing listens there; ServerError when something
    answers but not as an OpenAI-compatible server."""
    request = urllib.request.Request(base_url.rstrip("/") + "/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = json.loads(response.read().decode("utf-8", "replace"))
        return [str(entry["id"]) for entry in body["data"]]
    except urllib.error.HTTPError as error:
        raise ServerError(f"{base_url}/models answered HTTP {error.code} {error.reason}") from error
    except urllib.error.URLError as error:
        if isinstance(error.reason, ConnectionRefusedError):
            return None
        raise ServerError(f"{base_url} cannot be reached: {error.reason}") from error
    except (TimeoutError, http.client.HTTPException, ConnectionError) as error:
        raise ServerError(f"{base_url} does not answer as an HTTP server: {error!r}") from error
    except (ValueError, KeyError, TypeError) as error:
        raise ServerError(f"{base_url}/models is not an OpenAI-compatible model list: {error!r}") from error


class LlamaServer:
    """One model server on host:port: reused when it already serves `config.model`, else started."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.base_url = f"http://{config.host}:{config.port}/v1"
        self.model = config.model
        self.log_file = config.log_file or cache_dir() / "logs" / f"llama-server-{config.port}.log"
        self.owned = False  # True while this object's child process is the server
        self.startup_s = 0.0
        self._process: subprocess.Popen | None = None
        self._log_offset = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> LlamaServer:
        started = time.monotonic()
        models = served_models(self.base_url)
        if models is not None:
            if self.model not in models:
                raise ServerError(
                    f"{self.base_url} already serves {models}, not {self.model!r}: stop that server, or set another "
                    "port (embedded.port in the LLM profile)"
                )
            self.startup_s = time.monotonic() - started
            return self  # reused: not ours to stop
        from m3_runtime.child_processes import popen_tied  # here: bootstrap imports this module without it

        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        argv = self.config.argv()
        with open(self.log_file, "ab") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n".encode())
            self._log_offset = log.tell()
            self._process = popen_tied(  # the kernel stops it if this process dies without stopping it
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us; we stop the server in order
            )
        self.owned = True
        atexit.register(self.stop)
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        deadline = started + self.config.start_timeout_s
        last_error = ""
        while True:
            code = self._process.poll()
            if code is not None:
                raise ServerError(
                    f"the llama.cpp server for {self.config.model_path} exited with code {code} during start-up; "
                    f"{self.log_tail()}"
                )
            try:
                models = served_models(self.base_url, timeout_s=2.0)
            except ServerError as error:
                models, last_error = None, str(error)
            if models is not None:
                if self.model in models:
                    return
                last_error = f"it serves {models}, not {self.model!r}"
            if time.monotonic() > deadline:
                raise ServerError(
                    f"the llama.cpp server on {self.base_url} did not answer within {self.config.start_timeout_s:g} s"
                    f"{f' ({last_error})' if last_error else ''}; raise embedded.start_timeout_s if the machine is "
                    f"slow; {self.log_tail()}"
                )
            time.sleep(0.2)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines this start wrote to the log, for error messages."""
        try:
            with open(self.log_file, "rb") as log:
                log.seek(self._log_offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return f"no log at {self.log_file}"
        tail = "\n".join(text.strip().splitlines()[-lines:]) or "(empty)"
        return f"last lines of {self.log_file}:\n{tail}"

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server this object started (never a reused one); idempotent."""
        process, self._process = self._process, None
        atexit.unregister(self.stop)
        self.owned = False
        if process is None or process.poll() is not None:
            return
        for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(wait_s)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
