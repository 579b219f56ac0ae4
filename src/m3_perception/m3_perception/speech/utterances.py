"""Cut a 16 kHz stream into utterances from per-frame speech probabilities (hysteresis + hangover)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from m3_perception.speech.vad import FRAME

RATE = 16000


@dataclass
class SegmenterParams:
    threshold: float = 0.5  # speech starts when the probability reaches this
    neg_threshold: float = 0.35  # and counts as silence below this
    min_utterance_s: float = 0.3  # shorter bursts are dropped
    max_utterance_s: float = 15.0  # longer speech is cut here
    hangover_s: float = 0.5  # silence that ends an utterance
    pad_s: float = 0.1  # audio kept before and after the voiced part


@dataclass
class Utterance:
    """Voiced samples [start, end) in stream sample indices; `samples` include the padding and begin
    at stream index `first`."""

    start: int
    end: int
    samples: np.ndarray
    first: int


class UtteranceSegmenter:
    """Feed audio of any length; returns the utterances that ended inside it."""

    def __init__(self, prob: Callable[[np.ndarray], float], params: SegmenterParams | None = None) -> None:
        self.prob = prob
        self.p = params or SegmenterParams()
        self._pending = np.zeros(0, np.float32)
        self._pos = 0  # stream index of the first sample of _pending
        self._history = np.zeros(0, np.float32)  # recent audio, for padding and the utterance body
        self._hist_start = 0
        self._speech_start: int | None = None
        self._last_voiced = 0

    def feed(self, x: np.ndarray) -> list[Utterance]:
        out: list[Utterance] = []
        self._pending = np.concatenate([self._pending, np.asarray(x, np.float32)])
        n = len(self._pending) // FRAME
        for i in range(n):
            frame = self._pending[i * FRAME : (i + 1) * FRAME]
            start = self._pos + i * FRAME
            self._append_history(frame)
            p = self.prob(frame)
            u = self._step(p, start)
            if u is not None:
                out.append(u)
        self._pending = self._pending[n * FRAME :]
        self._pos += n * FRAME
        return out

    def flush(self) -> list[Utterance]:
        """End of stream: close an open utterance."""
        if self._speech_start is None:
            return []
        u = self._close(self._last_voiced)
        return [u] if u else []

    def _append_history(self, frame: np.ndarray) -> None:
        self._history = np.concatenate([self._history, frame])
        keep = int((self.p.max_utterance_s + self.p.hangover_s + 2 * self.p.pad_s) * RATE) + FRAME
        if self._speech_start is None and len(self._history) > keep:
            drop = len(self._history) - keep
            self._history = self._history[drop:]
            self._hist_start += drop

    def _step(self, p: float, start: int) -> Utterance | None:
        end = start + FRAME
        if self._speech_start is None:
            if p >= self.p.threshold:
                self._speech_start, self._last_voiced = start, end
            return None
        if p >= self.p.neg_threshold:
            self._last_voiced = end
        if end - self._speech_start >= self.p.max_utterance_s * RATE:
            return self._close(end, restart=p >= self.p.threshold)
        if end - self._last_voiced >= self.p.hangover_s * RATE:
            return self._close(self._last_voiced)
        return None

    def _close(self, end: int, restart: bool = False) -> Utterance | None:
        start = self._speech_start
        assert start is not None
        self._speech_start = end if restart else None
        self._last_voiced = end
        if end - start < self.p.min_utterance_s * RATE:
            return None
        pad = int(self.p.pad_s * RATE)
        a = max(self._hist_start, start - pad) - self._hist_start
        b = min(self._hist_start + len(self._history), end + pad) - self._hist_start
        samples = self._history[a:b].copy()
        return Utterance(start, end, samples, self._hist_start + a)
