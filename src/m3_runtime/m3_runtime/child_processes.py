"""Child processes that end with their parent, even when the parent is killed with SIGKILL (Linux).

Two kinds of children, two ways:
- A program started with subprocess (the llama.cpp server, the milvus-lite server): popen_tied() execs
  it through a tiny trampoline interpreter that sets PR_SET_PDEATHSIG and then execs the program (the
  setting survives exec), so the kernel sends it SIGTERM when its parent goes. Not preexec_fn: that
  runs Python between fork and exec, which can deadlock in a process with threads (DDS, workers).
  PDEATHSIG fires when the parent *thread* that forked the child ends, not the parent process, so
  every tied child is forked by one daemon thread that lives as long as the process: a thread that
  started a server and then ended (a node's configure, a bench thread) would otherwise take it along.
- A Python worker started by multiprocessing (the speech-to-text pool's): the pool forks from whichever
  thread submits first, which is not ours to choose, so die_with_parent() in the worker's initializer
  polls the parent pid instead and ends the worker once it was re-parented. The multiprocessing
  resource tracker then reads EOF (only the parent and its workers hold its pipe) and ends by itself.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

PR_SET_PDEATHSIG = 1
POLL_S = 0.5
# Runs in the child, in a fresh interpreter (-I -S: nothing of ours imported): argv = signal, parent pid, program...
_TRAMPOLINE = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[1]), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[2]):\n"
    "    os._exit(0)  # the parent died before prctl: no signal will come\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)

_lock = threading.Lock()
_spawner: tuple[int, queue.SimpleQueue] | None = None  # (pid that started it, its job queue)


def _spawn_loop(jobs: queue.SimpleQueue) -> None:
    while True:
        job, future = jobs.get()
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(job())
            except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                future.set_exception(error)


def _in_spawner_thread(job: Callable[[], Any]) -> Any:
    """Run `job` on the process's one spawner thread (a daemon: it ends only with the process)."""
    global _spawner
    with _lock:
        if _spawner is None or _spawner[0] != os.getpid():  # none yet, or this is a forked copy without it
            _spawner = (os.getpid(), queue.SimpleQueue())
            threading.Thread(target=_spawn_loop, args=(_spawner[1],), name="child-spawner", daemon=True).start()
        jobs = _spawner[1]
    future: Future = Future()
    jobs.put((job, future))
    return future.result()


def tied_argv(argv: list[str], on_parent_death: int = signal.SIGTERM) -> list[str]:
    """The command line that runs `argv` with PR_SET_PDEATHSIG set to `on_parent_death` (Linux)."""
    return [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(int(on_parent_death)), str(os.getpid()), *argv]


def popen_tied(argv: list[str], on_parent_death: int = signal.SIGTERM, **popen_kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen(argv, **popen_kwargs), whose process gets `on_parent_death` when this process
    dies, however it dies (Linux; elsewhere a plain Popen). Its pid is the program's (exec, no wrapper)."""
    if not sys.platform.startswith("linux"):
        return subprocess.Popen(argv, **popen_kwargs)
    command = tied_argv(list(argv), on_parent_death)
    return _in_spawner_thread(lambda: subprocess.Popen(command, **popen_kwargs))


def die_with_parent(parent_pid: int, poll_s: float = POLL_S) -> threading.Thread:
    """Call in a child process: it exits (status 0, at once) within `poll_s` of `parent_pid` no longer
    being its parent, i.e. of the parent's death. Returns the watching daemon thread."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(0)

    if os.getppid() != parent_pid:
        os._exit(0)
    watcher = threading.Thread(target=watch, name="die-with-parent", daemon=True)
    watcher.start()
    return watcher
