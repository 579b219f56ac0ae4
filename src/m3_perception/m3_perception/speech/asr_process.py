"""Speech-to-text in a child process.

pocketsphinx holds the GIL for the whole decode (0.5-0.9 s per utterance on these cores), which
stalls the face worker and the ROS executor threads of the same process. faster-whisper releases
it inside CTranslate2 but not in its Python feature extraction and decoding loop (measured in the
perception README). Decoding in a child process (concurrent.futures, one spawned worker) lets
faces, voices and message callbacks run side by side; the round trip costs a pickled copy of the
samples. The worker ends with its parent, even on SIGKILL (child_processes.die_with_parent), and leaves
Ctrl-C to the parent, which shuts the pool down in order.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from m3_perception.speech.pocketsphinx_asr import Transcript
from m3_runtime.child_processes import die_with_parent

_TRANSCRIBER: Any = None  # built once per child process, on its first task


def _start_worker(parent_pid: int) -> None:
    """The worker's initializer: Ctrl-C reaches the whole terminal process group, but it is the parent's
    to handle (a KeyboardInterrupt here would print a traceback); a parent that dies takes it along."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)


def _build(backend: str, options: dict[str, Any]) -> Any:
    if backend == "pocketsphinx":
        from m3_perception.speech.pocketsphinx_asr import PocketsphinxAsr

        return PocketsphinxAsr(**options)
    if backend == "faster_whisper":
        from m3_perception.speech.faster_whisper_asr import FasterWhisperAsr

        return FasterWhisperAsr(**options)
    raise ValueError(f"no subprocess transcriber for backend {backend!r}")


def _transcribe(backend: str, options: dict[str, Any], samples: np.ndarray | None) -> Transcript | None:
    global _TRANSCRIBER
    if _TRANSCRIBER is None:
        _TRANSCRIBER = _build(backend, options)
    return None if samples is None else _TRANSCRIBER.transcribe(samples)


def _counter(name: str) -> int | None:
    return getattr(_TRANSCRIBER, name, None)


class AsrProcessError(RuntimeError):
    """The speech-to-text child process died (it is restarted on the next utterance)."""


class SubprocessAsr:
    """A Transcriber whose decoder lives in a child process; start-up errors (a missing model file)
    are raised here, in the constructor, with their own type."""

    def __init__(self, backend: str, timeout_s: float = 120.0, **options: Any) -> None:
        self._spec = (backend, options)
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pool = self._start()
        try:
            self._pool.submit(_transcribe, *self._spec, None).result(timeout=timeout_s)  # load the model now
        except BaseException:
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise

    def _start(self) -> ProcessPoolExecutor:
        # spawn, not fork: the parent runs DDS and worker threads, which a forked child must not inherit.
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(os.getpid(),),
        )

    def transcribe(self, samples: np.ndarray) -> Transcript:
        with self._lock:
            pool = self._pool
        try:
            return pool.submit(_transcribe, *self._spec, np.asarray(samples, np.float32)).result(self._timeout_s)
        except BrokenProcessPool as error:
            with self._lock:
                if self._pool is pool:
                    self._pool = self._start()
            raise AsrProcessError(f"speech-to-text process died ({error}); restarted") from error

    @property
    def redecoded(self) -> int | None:
        """The child transcriber's windowed transcripts decoded again (FasterWhisperAsr.redecoded); None
        for one that keeps no such count. A restarted child counts from 0."""
        with self._lock:
            pool = self._pool
        return pool.submit(_counter, "redecoded").result(self._timeout_s)

    def close(self) -> None:
        with self._lock:
            self._pool.shutdown(wait=True, cancel_futures=True)
