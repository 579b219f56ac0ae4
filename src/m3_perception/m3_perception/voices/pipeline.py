"""Voices over a stream: VAD → utterances → speaker embedding → voice_N ids → transcript."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from m3_perception.identity_clusters import IdentityClusters, cosine_to_l2
from m3_perception.speech.pocketsphinx_asr import Transcriber, Transcript
from m3_perception.speech.utterances import RATE, SegmenterParams, Utterance, UtteranceSegmenter
from m3_perception.speech.vad import FRAME, SileroVad
from m3_perception.voices.band import is_narrowband
from m3_perception.voices.resemblyzer_encoder import EMBEDDING_MODEL, MIN_SAMPLES, VoiceEncoder
from m3_perception.voices.revision import RevisionParams, Turn, VoiceReviser, VoiceUpdate
from m3_perception.voices.speaker_activity import ActivityModel, ActivityParams, speaker_activity
from m3_perception.voices.speaker_turns import TurnParams, split_turns


@dataclass
class VoiceParams:
    match_cosine: float = 0.45  # CAM++ (the default encoder; README, Thresholds); resemblyzer: 0.75
    # for turns heard through a narrow-band channel (band.py: a phone call); used when above match_cosine
    match_cosine_narrowband: float = 0.0
    max_exemplars: int = 20
    segmenter: SegmenterParams = field(default_factory=SegmenterParams)
    turns: TurnParams = field(default_factory=TurnParams)  # speaker changes inside a voiced segment
    # How a voiced segment is cut into turns (when turns.enabled): "segmentation" (pyannote
    # segmentation-3.0 frame activity: turns and overlap), "embedding" (split_turns' window cosines)
    # or "both" (segmentation, then split_turns inside each of its turns).
    turn_mode: str = "both"
    activity: ActivityParams = field(default_factory=ActivityParams)
    segmentation_min_s: float = 1.0  # voiced segments shorter than this are one turn, unsegmented [s]
    revision: RevisionParams = field(default_factory=RevisionParams)  # recent turns re-clustered (voice_revision)


TURN_MODES = ("segmentation", "embedding", "both")


@dataclass
class VoiceEvent:
    """One utterance (one speaker's turn), as published in VoiceSegment."""

    segment_id: int
    voice_id: str  # "" when too short to tell who spoke and no known voice is near (never a new id)
    start: float  # stream time of the first voiced sample [s]
    end: float  # stream time of the last voiced sample [s]
    transcript: Transcript
    embedding: np.ndarray
    new_identity: bool = False
    overlap: bool = False  # two or more people at once: published with voice_id "", given to no voice


@dataclass
class _Piece:
    """A piece of an utterance, embedded and given a voice, before it is heard (VoicePipeline._finish)."""

    start_i: int  # first voiced sample [stream index]
    end_i: int  # one past the last voiced sample [stream index]
    heard: tuple[int, int]  # what speech recognition hears of it [utterance sample indexes]
    embedding: np.ndarray
    voice_id: str
    created: bool
    overlap: bool
    narrow: bool


def voiced_pieces(
    pieces: list[tuple[int, int, bool]], first: int, start: int, end: int
) -> list[tuple[int, int, bool, int, int]]:
    """(a, b, overlap, start, end) for each piece [a, b) of an utterance's samples (stream index `first`
    onwards) that holds voiced speech, [start, end) in stream indices: the piece within the utterance's
    voiced part. A piece wholly in the padding before or after the voiced part (the segmentation model
    can hear a turn the VAD did not) is dropped: its span would end before it starts."""
    kept = []
    for a, b, overlap in pieces:
        s, e = max(start, first + a), min(end, first + b)
        if e > s:
            kept.append((a, b, overlap, s, e))
    return kept


class StreamClock:
    """Maps stream sample indices to stream time from the header stamps of the chunks.

    Time never runs backwards inside the stream: a chunk stamped a little before the end of the
    previous one (stamping jitter, overlap up to `max_overlap_s`) continues where that one ended.
    A chunk stamped earlier than that starts a new timeline (`goes_back`), and the voice pipeline
    closes the open utterance first (`VoicePipeline._break`), so no utterance ends before it starts.
    """

    def __init__(self, max_overlap_s: float = 0.5) -> None:
        self._anchors: list[tuple[int, float]] = []  # (sample index, stamp of that sample)
        self.samples = 0
        self.max_overlap_s = max_overlap_s

    def goes_back(self, stamp: float) -> bool:
        """True when a chunk at `stamp` starts before the stream reached, by more than jitter."""
        return bool(self._anchors) and stamp < self.time_of(self.samples) - self.max_overlap_s

    def add_chunk(self, stamp: float, n: int) -> None:
        if self._anchors and not self.goes_back(stamp):
            stamp = max(stamp, self.time_of(self.samples))
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
        self,
        vad: SileroVad,
        encoder: VoiceEncoder,
        asr: Transcriber | None,
        params: VoiceParams | None = None,
        activity_model: ActivityModel | None = None,
    ) -> None:
        self.p = params or VoiceParams()
        if self.p.turn_mode not in TURN_MODES:
            raise ValueError(f"turn_mode {self.p.turn_mode!r}: expected one of {', '.join(TURN_MODES)}")
        self.activity_model = activity_model
        if activity_model is None and self.p.turns.enabled and self.p.turn_mode != "embedding":
            from m3_perception.voices.segmentation import Segmentation  # torch model, loaded only when used

            self.activity_model = Segmentation()
        self.vad = vad
        self.encoder = encoder
        self.asr = asr
        self.segmenter = UtteranceSegmenter(self._frame_prob, self.p.segmenter)
        # Recent VAD frame probabilities (frame k = stream samples [k·FRAME, (k+1)·FRAME)): a turn cut
        # inside an utterance is trimmed to its voiced frames, so the 0-0.3 s gap between back-to-back
        # turns belongs to neither (measured on real conversations: 2-2.7 s false alarm per 35 s).
        self._probs: deque[float] = deque(maxlen=int((self.p.segmenter.max_utterance_s + 5.0) * RATE / FRAME))
        self._probs_end = 0  # frame index after the last probability kept
        # Voices compare with each identity's centroid too: on the demo episode (40 utterances, 3
        # voices) the nearest earlier utterance of the same voice was sometimes below 0.75 cosine
        # (5 voice ids), while the running centroid was not (3 ids, no merge; other voices ≤ 0.66).
        self.clusters = IdentityClusters(
            "voice", cosine_to_l2(self.p.match_cosine), self.p.max_exemplars, 0, centroid=True
        )
        self.reviser = VoiceReviser(
            self.p.revision, self.clusters, encoder, self.p.match_cosine, self.p.match_cosine_narrowband
        )
        self._updates: list[VoiceUpdate] = []  # revisions not yet taken (take_updates)
        self.clock = StreamClock()
        self.embedding_model = getattr(encoder, "embedding_model", EMBEDDING_MODEL)
        self._next_segment = 1
        # Called when speech recognition fails; the utterance is still published, with no transcript.
        self.on_asr_error: Callable[[Exception], None] | None = None
        # totals, for the bench; "turns": the windowed embeddings looking for speaker changes,
        # "segmentation": the segmentation model and its post-processing
        stages = ("vad", "segmentation", "turns", "speaker", "asr", "revision")
        self.timings_ms: dict[str, float] = dict.fromkeys(stages, 0.0)

    def _frame_prob(self, frame: np.ndarray) -> float:
        p = self.vad.frame_prob(frame)
        self._probs.append(p)
        self._probs_end += 1
        return p

    def _voiced_span(self, start_i: int, end_i: int) -> tuple[int, int]:
        """[start_i, end_i) narrowed to its first and last frames at or above the VAD threshold
        (unchanged when none is, or when the frames are no longer kept)."""
        first = self._probs_end - len(self._probs)
        a, b = start_i // FRAME, -(-end_i // FRAME)
        if a < first or b > self._probs_end or b <= a:
            return start_i, end_i
        probs = np.fromiter((self._probs[k - first] for k in range(a, b)), float, b - a)
        voiced = np.flatnonzero(probs >= self.p.segmenter.threshold)
        if len(voiced) == 0:
            return start_i, end_i
        return max(start_i, (a + int(voiced[0])) * FRAME), min(end_i, (a + int(voiced[-1]) + 1) * FRAME)

    def feed(self, samples: np.ndarray, stamp: float) -> list[VoiceEvent]:
        """Add one decoded chunk (mono float32 16 kHz) captured at `stamp`; return finished utterances."""
        events = self._break() if self.clock.goes_back(stamp) else []
        self.clock.add_chunk(stamp, len(samples))
        t0 = time.perf_counter()
        utterances = self.segmenter.feed(samples)
        self.timings_ms["vad"] += (time.perf_counter() - t0) * 1000
        return self._revise(events + [ev for u in utterances for ev in self._finish(u)], final=False)

    def flush(self) -> list[VoiceEvent]:
        return self._revise([ev for u in self.segmenter.flush() for ev in self._finish(u)], final=True)

    def attribute(self, ev: VoiceEvent, face: str | None) -> None:
        """The face dominant while `ev` was spoken, told before `ev` is published: evidence for splitting
        a voice by face, and within a voice split so, the face in view decides (voice_faces)."""
        voice = self.reviser.attribute(ev.segment_id, face or "")
        if voice is not None:
            ev.voice_id = voice

    def take_updates(self) -> list[VoiceUpdate]:
        """Revisions of turns already returned, made since the last call (publish them after the events
        returned with them)."""
        updates, self._updates = self._updates, []
        return updates

    def _revise(self, events: list[VoiceEvent], final: bool) -> list[VoiceEvent]:
        """Revise recent turns when due (voice_revision; at the end of the stream always). A change to
        a turn of `events` (not yet returned) is made in the event itself; changes to turns returned
        before are kept as an update for take_updates."""
        now = self.clock.time_of(self.clock.samples)
        if not (self.reviser.due(now) or (final and self.reviser.turns and self.p.revision.enabled)):
            return events
        t0 = time.perf_counter()
        update = self.reviser.revise(now)
        self.timings_ms["revision"] += (time.perf_counter() - t0) * 1000
        mine = {ev.segment_id: ev for ev in events}
        into = dict(update.merges)
        for ev in events:
            ev.voice_id = into.get(ev.voice_id, ev.voice_id)
        published = []
        for seg, before, now_id in update.corrections:
            if seg in mine:
                mine[seg].voice_id = now_id
            else:
                published.append((seg, before, now_id))
        update.corrections = published
        if update:
            self._updates.append(update)
        return events

    def _break(self) -> list[VoiceEvent]:
        """The next chunk is stamped back in time (a recording played again): complete the last VAD
        frame with silence and close the open utterance, so that no frame or utterance spans the jump."""
        pad = np.zeros(-self.clock.samples % FRAME, np.float32)
        events = self.feed(pad, self.clock.time_of(self.clock.samples)) if len(pad) else []
        return events + self.flush()

    def close(self) -> None:
        """Stop a speech-to-text back-end that runs outside this thread (SubprocessAsr's child)."""
        close = getattr(self.asr, "close", None)
        if close is not None:
            close()

    def _finish(self, u: Utterance) -> list[VoiceEvent]:
        """One event per speaker turn of the utterance (its voiced part cut at the changes of voice)
        and one per overlapped stretch (voice_id ""). Consecutive pieces given the same voice are one
        turn, heard whole: the segmentation model now and then cuts one person's sentence (a synthetic
        voice's "Here it is. Chocolate with | raspberries" was heard as "Chocolate Wh-" and "Yes, yes,
        yes, yes."), and who spoke is the same either way."""
        pieces = self._pieces(u)
        turns: list[list[_Piece]] = []
        for a, b, overlap, start, end in voiced_pieces(pieces, u.first, u.start, u.end):
            if len(pieces) > 1:
                start, end = self._voiced_span(start, end)
            # Speech recognition hears the turn with up to pad_s more on each side, within its piece: the
            # VAD reaches its threshold a frame or more into a word, and a first word cut at its onset is
            # lost ("Mum, I can't eat" was heard as "I can't eat"; 7 of 8 vocatives, README).
            pad = int(self.p.segmenter.pad_s * RATE)
            heard = (max(a, start - u.first - pad), min(b, end - u.first + pad))
            piece = self._identified(u.samples[start - u.first : end - u.first], start, end, overlap, heard)
            last = turns[-1][-1] if turns else None
            if last is not None and piece.voice_id and not piece.overlap and piece.voice_id == last.voice_id:
                turns[-1].append(piece)
            else:
                turns.append([piece])
        return [self._turn(u, turn) for turn in turns]

    def _pieces(self, u: Utterance) -> list[tuple[int, int, bool]]:
        """[a, b) ranges of `u.samples` covering it, in order, with whether each is overlap."""
        n, voiced = len(u.samples), (u.start - u.first, u.end - u.first)
        whole = [(0, n, False)]
        if not self.p.turns.enabled:
            return whole
        if self.p.turn_mode == "embedding":
            return self._split(u.samples, 0, voiced)
        if voiced[1] - voiced[0] < self.p.segmentation_min_s * RATE:
            return whole
        t0 = time.perf_counter()
        assert self.activity_model is not None  # loaded in __init__ for these modes
        found = speaker_activity(u.samples, self.activity_model, self.p.activity).pieces
        self.timings_ms["segmentation"] += (time.perf_counter() - t0) * 1000
        if not found:
            return whole
        # Cut between consecutive pieces in the middle of the pause between them (if any): the
        # voiced trimming of _finish then drops the pause.
        cuts = [0] + [(p.end + q.start) // 2 for p, q in pairwise(found)] + [n]
        pieces = [(cuts[i], cuts[i + 1], p.overlap) for i, p in enumerate(found)]
        if self.p.turn_mode == "both":
            split = [[(a, b, ov)] if ov else self._split(u.samples[a:b], a, voiced) for a, b, ov in pieces]
            pieces = [q for qs in split for q in qs]
        return pieces

    def _split(self, x: np.ndarray, offset: int, voiced: tuple[int, int]) -> list[tuple[int, int, bool]]:
        """split_turns (speaker-embedding windows) on x = samples[offset:], as pieces of the utterance;
        `voiced`: where the speech lies in the utterance."""
        t0 = time.perf_counter()
        lo, hi = max(0, voiced[0] - offset), min(len(x), voiced[1] - offset)
        cut = split_turns(x, self.encoder, self.p.turns, (lo, max(lo, hi)))
        self.timings_ms["turns"] += (time.perf_counter() - t0) * 1000
        return [(offset + a, offset + b, False) for a, b in cut]

    def _identified(self, x: np.ndarray, start_i: int, end_i: int, overlap: bool, heard: tuple[int, int]) -> _Piece:
        """A piece of an utterance embedded and given a voice: `x` its voiced samples, `heard` the range of
        the utterance's samples speech recognition hears for it (x and the padding around it)."""
        emb = self._embedded(x)
        start, end = self.clock.time_of(start_i), self.clock.time_of(end_i)
        # Overlapped speech holds two voices: its embedding would pull any voice towards the other.
        # A narrow-band (telephone) turn is matched at its own, stricter threshold: the band brings voices closer.
        narrow = not overlap and self.p.match_cosine_narrowband > self.p.match_cosine and is_narrowband(x)
        cosine = self.p.match_cosine_narrowband if narrow else self.p.match_cosine
        duration_s = (end_i - start_i) / RATE
        voice_id, created = ("", False) if overlap else self._identify(emb, start, duration_s, cosine_to_l2(cosine))
        if voice_id:
            ident = self.clusters.identities[voice_id]
            ident.last_seen = max(ident.last_seen, end)
        return _Piece(start_i, end_i, heard, emb, voice_id, created, overlap, narrow)

    def _turn(self, u: Utterance, pieces: list[_Piece]) -> VoiceEvent:
        """The event of one turn: one piece, or consecutive pieces of one voice heard and embedded whole."""
        first, last = pieces[0], pieces[-1]
        start_i, end_i = first.start_i, last.end_i
        x = u.samples[start_i - u.first : end_i - u.first]
        emb = first.embedding if len(pieces) == 1 else self._embedded(x)
        t2 = time.perf_counter()
        text = Transcript("", 0.0)
        if self.asr is not None:
            try:
                text = self.asr.transcribe(u.samples[first.heard[0] : last.heard[1]])
            except Exception as e:
                if self.on_asr_error is None:
                    raise
                self.on_asr_error(e)
        self.timings_ms["asr"] += (time.perf_counter() - t2) * 1000
        start, end = self.clock.time_of(start_i), self.clock.time_of(end_i)
        created = any(p.created for p in pieces)
        ev = VoiceEvent(self._next_segment, first.voice_id, start, end, text, emb, created, first.overlap)
        self._next_segment += 1
        short = (end_i - start_i) / RATE < self.p.turns.min_turn_s
        narrow = all(p.narrow for p in pieces)
        audio = np.array(x, np.float32)
        self.reviser.add(Turn(ev.segment_id, first.voice_id, start, end, emb, audio, short, first.overlap, narrow))
        return ev

    def _embedded(self, x: np.ndarray) -> np.ndarray:
        """The speaker embedding of x, padded with silence to the encoders' shortest input."""
        t0 = time.perf_counter()
        emb = self.encoder.encode(x if len(x) >= MIN_SAMPLES else np.pad(x, (0, MIN_SAMPLES - len(x))))
        self.timings_ms["speaker"] += (time.perf_counter() - t0) * 1000
        return emb

    def _identify(self, emb: np.ndarray, stamp: float, duration_s: float, max_distance: float) -> tuple[str, bool]:
        """(voice id, created?). A turn shorter than `turns.min_turn_s` ("yes", "mm") is too short to
        embed reliably (README: a 0.6 s piece's nearest voice was right 60 % of the time, a 1 s
        piece's 98 %): it may join the nearest known voice when within `match_cosine`, keeping
        no exemplar, but never founds a voice; otherwise its voice id is ""."""
        if duration_s >= self.p.turns.min_turn_s:
            return self.clusters.assign(emb, stamp, max_distance)
        ident_id, d = self.clusters.nearest(emb)
        if ident_id is None or d > max_distance:
            return "", False
        self.clusters.observe(ident_id, stamp)
        return ident_id, False
