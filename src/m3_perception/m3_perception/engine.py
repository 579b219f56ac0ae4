"""Perception engine: the node's work without ROS — rate limiting, worker threads, drop counting.

Frames and audio arrive on the executor thread (`submit_frame`, `submit_audio`, both cheap);
face and voice work runs on two worker threads so the executor is never blocked for seconds.
Results go out through callbacks (the node turns them into messages). All times are stream
times (header stamps, seconds).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from m3_perception.face_voice_matcher import FaceVoiceMatcher, MatchCandidate
from m3_perception.faces.pipeline import FaceObs, FacePipeline
from m3_perception.identity_clusters import IdentityClusters, IdentityState
from m3_perception.voices.pipeline import VoiceEvent, VoicePipeline
from m3_perception.voices.revision import VoiceUpdate


@dataclass
class EngineStats:
    frames_received: int = 0
    frames_skipped_rate: int = 0  # not needed at face_rate_hz
    frames_dropped: int = 0  # needed but replaced by a newer frame while the face worker was busy
    frames_processed: int = 0
    audio_chunks: int = 0
    audio_dropped_s: float = 0.0  # audio discarded because the voice worker fell too far behind
    utterances: int = 0
    face_ms: list[float] = field(default_factory=list)
    voice_ms: list[float] = field(default_factory=list)


@dataclass
class EngineCallbacks:
    on_faces: Callable[[float, int, int, list[FaceObs]], None]  # stamp, width, height, faces
    on_voice: Callable[[VoiceEvent], None]
    on_match: Callable[[MatchCandidate], None]
    on_identities: Callable[[str, float, list[IdentityState]], None]  # kind "face"/"voice", stamp, all
    on_error: Callable[[str, Exception], None]  # worker failure: logged by the node, work goes on
    on_voice_update: Callable[[VoiceUpdate], None] | None = None  # a revision of voices already published


class PerceptionEngine:
    def __init__(
        self,
        faces: FacePipeline | None,
        voices: VoicePipeline | None,
        matcher: FaceVoiceMatcher,
        callbacks: EngineCallbacks,
        face_rate_hz: float = 5.0,
        max_audio_backlog_s: float = 30.0,
        identities_period_s: float = 1.0,
    ) -> None:
        self.faces, self.voices, self.matcher, self.cb = faces, voices, matcher, callbacks
        self.min_frame_gap = 1.0 / face_rate_hz if face_rate_hz > 0 else 0.0
        self.max_audio_backlog = int(max_audio_backlog_s * 16000)
        self.identities_period_s = identities_period_s
        self.stats = EngineStats()
        if voices is not None:
            voices.on_asr_error = lambda e: callbacks.on_error("speech recognition failed (utterance kept)", e)
        self._lock = threading.Lock()
        self._match_lock = threading.Lock()
        self._frame_slot: tuple[float, np.ndarray] | None = None
        self._frame_ready = threading.Condition(self._lock)
        self._last_frame_stamp: float | None = None
        # Stream time reached by the input and by each worker (for players that pace on progress).
        # Per input stream (faces, voices): the stamp its input has reached (frames: last frame
        # received, processed or discarded; audio: end of the last chunk queued).
        self._input_until = [float("-inf"), float("-inf")]
        self._faces_until = float("-inf")
        self._voices_until = float("-inf")
        self._audio: collections.deque[tuple[float, np.ndarray]] = collections.deque()
        self._audio_samples = 0
        self._audio_ready = threading.Condition(threading.Lock())
        self._stop = threading.Event()
        self._published: dict[str, tuple[float, tuple]] = {}
        self._idle = threading.Event()
        self._threads = [
            threading.Thread(target=self._face_loop, name="m3_faces", daemon=True),
            threading.Thread(target=self._voice_loop, name="m3_voices", daemon=True),
        ]
        self._busy = [False, False]
        for t in self._threads:
            t.start()

    # -- input (executor thread) -------------------------------------------------------------
    def frame_wanted(self, stamp: float) -> bool:
        """Rate limit on stream time, checked before decoding so skipped frames cost nothing."""
        self.stats.frames_received += 1
        last = self._last_frame_stamp
        if last is not None and 0.0 <= stamp - last < self.min_frame_gap - 1e-6:
            self.stats.frames_skipped_rate += 1
            self.frame_discarded(stamp)
            return False
        self._last_frame_stamp = stamp
        return True

    def frame_discarded(self, stamp: float) -> None:
        """A frame that will never reach the face worker (skipped, or undecodable) counts as processed.

        A wanted frame advances the input only once it is in the slot (submit_frame): advanced
        earlier, a player pacing on processed_until could send the next frame while this one is
        still being decoded, and that frame would replace it in the slot.
        """
        with self._lock:
            self._input_until[0] = max(self._input_until[0], stamp)

    def submit_frame(self, stamp: float, rgb: np.ndarray) -> None:
        with self._frame_ready:
            if self._frame_slot is not None:
                self.stats.frames_dropped += 1
            self._frame_slot = (stamp, rgb)
            self._input_until[0] = max(self._input_until[0], stamp)
            self._frame_ready.notify()

    def submit_audio(self, stamp: float, samples: np.ndarray) -> None:
        with self._audio_ready:
            self.stats.audio_chunks += 1
            self._audio.append((stamp, samples))
            self._audio_samples += len(samples)
            while self._audio_samples > self.max_audio_backlog and len(self._audio) > 1:
                _, old = self._audio.popleft()
                self._audio_samples -= len(old)
                self.stats.audio_dropped_s += len(old) / 16000
            self._audio_ready.notify()
        with self._lock:  # after the chunk is queued: processed_until never sees input it has not queued
            self._input_until[1] = max(self._input_until[1], stamp + len(samples) / 16000)

    def processed_until(self, expected: tuple[bool, bool] = (False, False)) -> float:
        """Stream time up to which every input received has been processed (-inf before any input).

        Each stream that has had input bounds it: a busy stream at what it has processed, an idle
        one at the input it has received. An idle stream is not taken to be as far as the other: a
        frame still in transit (or not yet taken by the executor) while later audio is processed
        would then let a bag player send the next frame, and that frame would replace it in the
        slot. A player pacing on this (`m3 play --keep-up`) never asks for more than the last
        message it sent on each topic, so a stream that stops (a camera unplugged) holds nobody up.
        expected (frames, audio): streams a publisher is matched to, which bound it before their first
        input too (-inf): else the player's first frame still in transit while audio was processed let
        it send the second, which could replace the first in the slot (CI lost 1 of 82 frames).
        """
        with self._lock:  # the inputs first: whatever they cover is already queued or being processed
            inputs = list(self._input_until)
            faces = self._faces_until if self._frame_slot is not None or self._busy[0] else inputs[0]
        with self._audio_ready:
            voices = self._voices_until if self._audio or self._busy[1] else inputs[1]
        streams = zip((faces, voices), inputs, expected, strict=True)
        bounds = [bound for bound, received, wanted in streams if wanted or received > float("-inf")]
        return min(bounds) if bounds else float("-inf")

    def frame_pending(self) -> bool:
        """True while a submitted frame waits for the face worker (a lossless feeder waits on it)."""
        with self._lock:
            return self._frame_slot is not None

    def idle(self) -> bool:
        """True when no frame or audio is waiting or being processed (used by tests and the bench)."""
        with self._lock:
            frames = self._frame_slot is None
        with self._audio_ready:
            audio = not self._audio
        return frames and audio and not any(self._busy)

    def flush_voices(self) -> None:
        """End of stream: close the open utterance (called from the voice thread's queue)."""
        with self._audio_ready:
            self._audio.append((float("nan"), np.zeros(0, np.float32)))
            self._audio_ready.notify()

    def close(self) -> None:
        self._stop.set()
        with self._frame_ready:
            self._frame_ready.notify_all()
        with self._audio_ready:
            self._audio_ready.notify_all()
        for t in self._threads:
            t.join(timeout=10.0)
        if self.voices is not None:
            self.voices.close()

    # -- workers -------------------------------------------------------------------------------
    def _face_loop(self) -> None:
        import time

        while not self._stop.is_set():
            with self._frame_ready:
                while self._frame_slot is None and not self._stop.is_set():
                    self._frame_ready.wait(0.5)
                if self._stop.is_set():
                    return
                stamp, rgb = self._frame_slot  # type: ignore[misc]
                self._frame_slot = None
                self._busy[0] = True
            try:
                if self.faces is not None:
                    t0 = time.perf_counter()
                    obs = self.faces.process(rgb, stamp)
                    self.stats.face_ms.append((time.perf_counter() - t0) * 1000)
                    self.stats.frames_processed += 1
                    with self._match_lock:
                        self.matcher.observe_faces(stamp, [(o.face_id, o.box[2] * o.box[3]) for o in obs])
                    self.cb.on_faces(stamp, rgb.shape[1], rgb.shape[0], obs)
                    self._maybe_publish_identities("face", self.faces.clusters, stamp, any(o.new_identity for o in obs))
            except Exception as e:  # noqa: BLE001 - a bad frame must never stop the node
                self.cb.on_error("face processing failed", e)
            finally:
                with self._lock:
                    self._faces_until = max(self._faces_until, stamp)  # done with it, even when it failed
                    self._busy[0] = False

    def _voice_loop(self) -> None:
        import time

        while not self._stop.is_set():
            with self._audio_ready:
                while not self._audio and not self._stop.is_set():
                    self._audio_ready.wait(0.5)
                if self._stop.is_set():
                    return
                stamp, samples = self._audio.popleft()
                self._audio_samples -= len(samples)
                self._busy[1] = True
            try:
                if self.voices is not None:
                    t0 = time.perf_counter()
                    events = self.voices.flush() if np.isnan(stamp) else self.voices.feed(samples, stamp)
                    self.stats.voice_ms.append((time.perf_counter() - t0) * 1000)
                    for ev in events:
                        self.stats.utterances += 1
                        with self._match_lock:
                            face = self.matcher.dominant_face(ev.start, ev.end)
                        self.voices.attribute(ev, face)
                        self.cb.on_voice(ev)
                        with self._match_lock:
                            cand = self.matcher.on_utterance(ev.voice_id, ev.start, ev.end)
                        if cand is not None:
                            self.cb.on_match(cand)
                        self._maybe_publish_identities("voice", self.voices.clusters, ev.end, ev.new_identity)
                    for update in self.voices.take_updates():  # after the events they revise
                        with self._match_lock:
                            for gone, keep in update.merges:
                                self.matcher.merge_voice(gone, keep)
                            for voice, new, face in update.splits:
                                self.matcher.split_voice(voice, new, face)
                        if self.cb.on_voice_update is not None:
                            self.cb.on_voice_update(update)
                        self._maybe_publish_identities("voice", self.voices.clusters, update.stamp, bool(update.merges))
            except Exception as e:  # noqa: BLE001 - bad audio must never stop the node
                self.cb.on_error("voice processing failed", e)
            finally:
                with self._audio_ready:
                    if not np.isnan(stamp):
                        self._voices_until = max(self._voices_until, stamp + len(samples) / 16000)
                    self._busy[1] = False

    def _maybe_publish_identities(self, kind: str, clusters: IdentityClusters, stamp: float, created: bool) -> None:
        """Publish the identity list on a new identity or a changed crop, else at most once per period."""
        idents = list(clusters.identities.values())
        sig = tuple((i.id, hash(i.best_crop())) for i in idents)
        last = self._published.get(kind)
        if last is not None and not created and sig == last[1] and stamp - last[0] < self.identities_period_s:
            return
        self._published[kind] = (stamp, sig)
        self.cb.on_identities(kind, stamp, idents)
