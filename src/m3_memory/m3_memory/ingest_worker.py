"""Memorization beside perception: closed clips wait in a bounded backlog and one worker thread
memorizes and stores them, in order, while perception goes on.

A model back-end is slow (seconds per clip) and may restart, so the stream must never wait on it
clip by clip, and no clip may be lost:
- a clip whose model is unreachable waits and is retried with exponential backoff (capped) until
  the model is back; clips behind it wait in the backlog, in order;
- when the backlog is full, `submit` blocks: the producer slows down instead of dropping (a replay
  simply waits; a live node logs it loudly, as DDS buffers its evidence queues meanwhile);
- a clip the model answers unusably (after the memorizer's own retries), or that is still waiting
  when shutdown's drain time is over, is stored by the rules memorizer, marked degraded in the
  store (meta `degraded_clip_N` = why) and logged as an error: degraded, never silent, never lost.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from m3_memory.graph.records import ClipEvidence, ClipRecord
from m3_memory.memorize.openai_compatible import MemorizerError, MemorizerUnavailable
from m3_memory.memorize.rules import RulesMemorizer
from m3_memory.memory import Memory

Log = Callable[[str, str], None]  # (level: "info" | "warning" | "error", message)

IDLE_FLUSH_S = 2.0  # while no clip waits: clips buffered during a storage outage are written this often


@dataclass
class IngestStats:
    """What the worker did; memorize_s holds the seconds each stored clip took (memorizer + store)."""

    stored: int = 0
    degraded: int = 0
    failed: int = 0  # not stored: the store itself failed (logged with its traceback)
    waits: int = 0  # retries of clips whose model was unavailable
    max_backlog: int = 0
    warm_up_s: float = 0.0  # the memorizer's warm-up before the first clip
    memorize_s: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        n = len(self.memorize_s)
        return {
            "clips_stored": self.stored,
            "clips_degraded": self.degraded,
            "clips_failed": self.failed,
            "memorizer_waits": self.waits,
            "max_backlog": self.max_backlog,
            "memorizer_warm_up_s": self.warm_up_s,
            "memorize_s_per_clip": round(sum(self.memorize_s) / n, 3) if n else 0.0,
            "memorize_s_max": round(max(self.memorize_s), 3) if n else 0.0,
        }


def _print_log(level: str, message: str) -> None:
    print(f"[memory {level}] {message}", flush=True)


class ClipIngester:
    """One worker thread storing submitted clips in order; see the module docstring for the policy."""

    def __init__(
        self,
        memory: Memory,
        backlog: int = 16,
        retry_max_s: float = 30.0,
        on_stored: Callable[[ClipRecord], None] | None = None,
        log: Log | None = None,
    ) -> None:
        self.memory = memory
        self.backlog = max(1, int(backlog))
        self.retry_max_s = max(0.1, float(retry_max_s))
        self.on_stored = on_stored
        self.log = log or _print_log
        config = memory.graph.config
        self.fallback = RulesMemorizer(config.equivalence_min_confidence, config.equivalence_min_evidence)
        self.stats = IngestStats()
        self._queue: deque[ClipEvidence] = deque()  # the head stays queued until it is stored
        self._cond = threading.Condition()
        self._closing = False
        self._abandoned = False
        self._give_up = threading.Event()  # shutdown's drain time is over: store the rest degraded
        self._thread = threading.Thread(target=self._run, name="m3-memorizer", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Clips submitted and not yet stored (the one being memorized included)."""
        with self._cond:
            return len(self._queue)

    def waiting(self) -> list[ClipEvidence]:
        """The clips submitted and not yet stored, oldest first (what search/heard.py serves meanwhile)."""
        with self._cond:
            return list(self._queue)

    def submit(self, clip: ClipEvidence) -> None:
        """Queue a closed clip; blocks while the backlog is full (backpressure, never a drop)."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the ingest worker is closed")
            if len(self._queue) >= self.backlog:
                self.log(
                    "error",
                    f"memorizer backlog full ({len(self._queue)} clips): clip {clip.clip_index} waits, "
                    "and so does the evidence behind it",
                )
            while len(self._queue) >= self.backlog and not self._give_up.is_set():
                self._cond.wait(0.5)
            self._queue.append(clip)
            self.stats.max_backlog = max(self.stats.max_backlog, len(self._queue))
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every submitted clip is stored; False if the timeout came first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left if left is not None else 1.0)
        return True

    def close(self, drain_s: float | None = None) -> IngestStats:
        """Store every submitted clip: wait up to drain_s (None: as long as it takes) for the model,
        then store what is left with the rules memorizer, marked degraded."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(drain_s)
        if self._thread.is_alive():
            self.log("error", f"memorizer still busy after {drain_s} s at shutdown: the rest is stored degraded")
            self._give_up.set()
            with self._cond:
                self._cond.notify_all()
            self._thread.join()
        return self.stats

    def abandon(self) -> int:
        """Stop after the clip being stored and drop the queued ones (an interrupted replay: none was
        reported stored, and a resumed replay redoes them). Returns how many were dropped."""
        with self._cond:
            self._closing = self._abandoned = True
            dropped = max(0, len(self._queue) - 1)
            while len(self._queue) > 1:
                self._queue.pop()
            self._cond.notify_all()
        self._thread.join()
        return dropped

    # -- the worker ---------------------------------------------------------------------------------
    def _run(self) -> None:
        self._warm_up()
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    if not self._cond.wait(IDLE_FLUSH_S):
                        self._cond.release()  # not held while writing to the storage
                        try:
                            self.memory.flush_pending()
                        finally:
                            self._cond.acquire()
                if not self._queue:
                    return
                clip = self._queue[0]
            try:
                self._ingest(clip)
            finally:
                with self._cond:
                    self._queue.popleft()
                    self._cond.notify_all()

    def _warm_up(self) -> None:
        """The memorizer gets ready while no clip is closed yet; a model that cannot be reached now
        is no failure (the first clip waits for it as usual)."""
        started = time.perf_counter()
        try:
            self.memory.memorizer.warm_up()
        except MemorizerError as error:
            self.log("warning", f"memorizer warm-up skipped: {error}")
            return
        self.stats.warm_up_s = round(time.perf_counter() - started, 3)

    def _ingest(self, clip: ClipEvidence) -> None:
        delay = min(1.0, self.retry_max_s)
        while not self._give_up.is_set():
            started = time.perf_counter()
            try:
                record = self.memory.ingest(clip)
            except MemorizerUnavailable as error:
                self.stats.waits += 1
                self.log(
                    "error",
                    f"clip {clip.clip_index} waits for the memorizer (again in {delay:.0f} s, "
                    f"{self.pending} clips in the backlog): {error}",
                )
                with self._cond:
                    self._cond.wait_for(lambda: self._give_up.is_set() or self._abandoned, timeout=delay)
                    if self._abandoned:
                        return
                delay = min(2 * delay, self.retry_max_s)
                continue
            except MemorizerError as error:
                self._degrade(clip, f"the model's replies were unusable: {error}")
                return
            except Exception as error:  # noqa: BLE001 - a store failure: logged in full, the worker goes on
                self.stats.failed += 1
                self.log("error", f"clip {clip.clip_index} not stored: {error}\n{traceback.format_exc()}")
                return
            self.stats.memorize_s.append(time.perf_counter() - started)
            self._stored(record)
            return
        self._degrade(clip, "the memorizer was still unavailable when the memory shut down")

    def _degrade(self, clip: ClipEvidence, reason: str) -> None:
        try:
            record = self.memory.ingest(clip, memorizer=self.fallback, degraded=reason)
        except Exception as error:  # noqa: BLE001 - logged in full; nothing else can be done for it
            self.stats.failed += 1
            self.log("error", f"clip {clip.clip_index} not stored: {error}\n{traceback.format_exc()}")
            return
        self.stats.degraded += 1
        self.log("error", f"clip {clip.clip_index} stored DEGRADED by the rules memorizer: {reason}")
        self._stored(record)

    def _stored(self, record: ClipRecord | None) -> None:
        if record is None:
            return
        self.stats.stored += 1
        if self.on_stored is not None:
            try:
                self.on_stored(record)
            except Exception as error:  # noqa: BLE001 - the clip is stored; a listener's failure is its own
                self.log("warning", f"clip {record.clip_index} stored, but its listener failed: {error}")
