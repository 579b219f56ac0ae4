"""Voices over a stream: VAD → utterances → speaker embedding → voice_N ids → transcript."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from m3_perception.asr import Transcriber, Transcript
from m3_perception.identity_clusters import IdentityClusters, cosine_to_l2
from m3_perception.utterances import RATE, SegmenterParams, Utterance, UtteranceSegmenter
from m3_perception.vad import SileroVad
from m3_perception.voice_encoder import EMBEDDING_MODEL, MIN_SAMPLES, VoiceEncoder


@dataclass
class VoiceParams:
    match_cosine: float = 0.75  # same synthetic/real voice 0.78–0.94, different voices 0.43–0.67
    max_exemplars: int = 20
    segmenter: SegmenterParams = field(default_factory=SegmenterParams)


@dataclass
class VoiceEvent:
    """One utterance, as published in VoiceSegment."""

    segment_id: int
    voice_id: str
    start: float  # stream time of the first voiced sample [s]
    end: float  # stream time of the last voiced sample [s]
    transcript: Transcript
    embedding: np.ndarray
    new_identity: bool = False


class StreamClock:
    """Maps stream sample indices to stream time from the header stamps of the chunks."""

    def __init__(self) -> None:
        self._anchors: list[tuple[int, float]] = []  # (sample index, stamp of that sample)
        self.samples = 0

    def add_chunk(self, stamp: float, n: int) -> None:
        self._anchors.append((self.samples, stamp))
        del self._anchors[:-256]
        self.samples += n

    def time_of(self, index: int) -> float:
        best = self._anchors[0]
        for a in self._anchors:
            if a[0] <= index:
                best = a
            else:
                break
        return best[1] + (index - best[0]) / RATE


class VoicePipeline:
    """Stateful per-episode voice identification and transcription."""

    def __init__(
        self, vad: SileroVad, encoder: VoiceEncoder, asr: Transcriber | None, params: VoiceParams | None = None
    ) -> None:
        self.p = params or VoiceParams()
        self.vad = vad
        self.encoder = encoder
        self.asr = asr
        self.segmenter = UtteranceSegmenter(vad.frame_prob, self.p.segmenter)
        # Voices compare with each identity's centroid too: on the demo episode (40 utterances, 3
        # voices) the nearest earlier utterance of the same voice was sometimes below 0.75 cosine
        # (5 voice ids), while the running centroid was not (3 ids, no merge; other voices ≤ 0.66).
        self.clusters = IdentityClusters(
            "voice", cosine_to_l2(self.p.match_cosine), self.p.max_exemplars, 0, centroid=True
        )
        self.clock = StreamClock()
        self.embedding_model = EMBEDDING_MODEL
        self._next_segment = 1
        # Called when speech recognition fails; the utterance is still published, with no transcript.
        self.on_asr_error: Callable[[Exception], None] | None = None
        self.timings_ms: dict[str, float] = {"vad": 0.0, "speaker": 0.0, "asr": 0.0}  # totals, for the bench

    def feed(self, samples: np.ndarray, stamp: float) -> list[VoiceEvent]:
        """Add one decoded chunk (mono float32 16 kHz) captured at `stamp`; return finished utterances."""
        self.clock.add_chunk(stamp, len(samples))
        t0 = time.perf_counter()
        utterances = self.segmenter.feed(samples)
        self.timings_ms["vad"] += (time.perf_counter() - t0) * 1000
        return [self._finish(u) for u in utterances]

    def flush(self) -> list[VoiceEvent]:
        return [self._finish(u) for u in self.segmenter.flush()]

    def close(self) -> None:
        """Stop a speech-to-text back-end that runs outside this thread (SubprocessAsr's child)."""
        close = getattr(self.asr, "close", None)
        if close is not None:
            close()

    def _finish(self, u: Utterance) -> VoiceEvent:
        x = u.samples
        if len(x) < MIN_SAMPLES:
            x = np.pad(x, (0, MIN_SAMPLES - len(x)))
        t0 = time.perf_counter()
        emb = self.encoder.encode(x)
        t1 = time.perf_counter()
        self.timings_ms["speaker"] += (t1 - t0) * 1000
        start, end = self.clock.time_of(u.start), self.clock.time_of(u.end)
        voice_id, created = self.clusters.assign(emb, start)
        ident = self.clusters.identities[voice_id]
        ident.last_seen = max(ident.last_seen, end)
        t2 = time.perf_counter()
        text = Transcript("", 0.0)
        if self.asr is not None:
            try:
                text = self.asr.transcribe(u.samples)
            except Exception as e:
                if self.on_asr_error is None:
                    raise
                self.on_asr_error(e)
        self.timings_ms["asr"] += (time.perf_counter() - t2) * 1000
        ev = VoiceEvent(self._next_segment, voice_id, start, end, text, emb, created)
        self._next_segment += 1
        return ev
