"""Objects and written text in camera frames for the node, without ROS: rate limit, tracking, the OCR
keyframe gate, and a worker thread of its own.

Why a worker of its own: object detection costs about 140 ms a frame and reading text 0.3-0.6 s a
keyframe on a CPU; on the face worker they would delay faces by as much. The seeing worker keeps one
frame slot: a frame that arrives while it is busy replaces the waiting one (counted as dropped), so
it never queues up behind the camera. Frames reach it at most `rate_hz` (stream time), checked
before decoding, as for faces. Stream progress (`processed_until`) waits for it as for faces, so a
replay paced on progress (`m3 play --keep-up`) loses no frame seeing wanted; a live camera is not paced,
and there seeing drops what it has no time for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from m3_perception.objects.detection import ObjectDetector
from m3_perception.objects.tracker import ObjectTracker
from m3_perception.text.ocr import TextReader
from m3_perception.text.regions import KeyframeGate, TextRegionTracker
from m3_runtime.image_codec import encode_jpeg

CROP_JPEG_QUALITY = 85

Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class SeeingParams:
    """rate_hz: frames per second of stream time looked at (detection and the text gate); the text_*
    values are KeyframeGate's. ValueError names the node parameter of a bad value."""

    rate_hz: float = 2.0
    track_confidence: float = 0.0  # least detector confidence that starts an object track (ObjectTracker; 0: any)
    text_interval_s: float = 5.0
    text_min_gap_s: float = 1.0
    text_change_threshold: float = 0.08

    def __post_init__(self) -> None:
        if not self.rate_hz > 0:
            raise ValueError(f"object_rate_hz must be > 0, got {self.rate_hz!r}")
        if not 0 <= self.track_confidence <= 1:
            raise ValueError(f"object_track_confidence must be in [0, 1], got {self.track_confidence!r}")
        if not self.text_interval_s > 0:
            raise ValueError(f"text_interval_s must be > 0, got {self.text_interval_s!r}")
        if not 0 <= self.text_min_gap_s <= self.text_interval_s:
            raise ValueError(
                f"text_min_gap_s ({self.text_min_gap_s}) must be in [0, text_interval_s ({self.text_interval_s})]"
            )
        if not 0 < self.text_change_threshold <= 1:
            raise ValueError(f"text_change_threshold must be in (0, 1], got {self.text_change_threshold!r}")


@dataclass(frozen=True)
class ObjectSighting:
    """One tracked object in one frame; crop_jpeg only when its best crop changed (else b"")."""

    object_id: str
    label: str
    confidence: float
    box: Box
    first_seen: float
    last_seen: float
    crop_jpeg: bytes


@dataclass(frozen=True)
class TextSighting:
    """One text region read in one keyframe: its best reading so far and this keyframe's box."""

    region_id: str
    text: str
    confidence: float
    box: Box
    first_seen: float
    last_seen: float
    is_new: bool


@dataclass(frozen=True)
class Seen:
    """What one frame gave: objects (None when detection is off) and text (None unless a keyframe was read)."""

    stamp: float
    width: int
    height: int
    objects: list[ObjectSighting] | None
    texts: list[TextSighting] | None


@dataclass
class SeeingStats:
    frames_received: int = 0  # camera frames offered (frame_wanted)
    frames_skipped_rate: int = 0  # not needed at rate_hz
    frames_dropped: int = 0  # needed but replaced by a newer frame while the worker was busy
    frames_processed: int = 0
    object_sightings: int = 0  # objects over all frames detected
    text_keyframes: int = 0  # frames read for text
    text_sightings: int = 0  # text regions over all keyframes read
    object_ms: list[float] = field(default_factory=list)  # detection + tracking + crops, per frame
    text_ms: list[float] = field(default_factory=list)  # reading + regions, per keyframe


class Seeing:
    """The per-frame logic: `process(rgb, stamp)` detects and tracks objects, and reads text when the
    keyframe gate says so. `detector` or `reader` None: that half is off."""

    def __init__(
        self, detector: ObjectDetector | None, reader: TextReader | None, params: SeeingParams | None = None
    ) -> None:
        self.params = params or SeeingParams()
        self.detector, self.reader = detector, reader
        self.tracker = (
            ObjectTracker(new_track_confidence=self.params.track_confidence) if detector is not None else None
        )
        self.regions = TextRegionTracker() if reader is not None else None
        p = self.params
        self.gate = KeyframeGate(p.text_interval_s, p.text_min_gap_s, p.text_change_threshold) if reader else None
        self.min_gap = 1.0 / p.rate_hz
        self.stats = SeeingStats()
        self._last_stamp: float | None = None
        self._crop_sent: dict[str, float] = {}  # object id -> best confidence whose crop went out

    def describe(self) -> str:
        objects = f"objects {self.detector.name} at {self.params.rate_hz:g} Hz" if self.detector else "objects off"
        return f"{objects}, text {self.reader.backend if self.reader else 'off'}"

    def frame_wanted(self, stamp: float) -> bool:
        """Rate limit on stream time (before decoding); a stamp going back starts over."""
        self.stats.frames_received += 1
        last = self._last_stamp
        if last is not None and 0.0 <= stamp - last < self.min_gap - 1e-6:
            self.stats.frames_skipped_rate += 1
            return False
        self._last_stamp = stamp
        return True

    def process(self, rgb: np.ndarray, stamp: float) -> Seen:
        objects = texts = None
        if self.detector is not None and self.tracker is not None:
            t0 = time.perf_counter()
            objects = self._objects(rgb, stamp)
            self.stats.object_ms.append((time.perf_counter() - t0) * 1000)
            self.stats.object_sightings += len(objects)
        if self.reader is not None and self.gate is not None and self.gate.decide(rgb, stamp):
            t0 = time.perf_counter()
            texts = self._texts(rgb, stamp)
            self.stats.text_ms.append((time.perf_counter() - t0) * 1000)
            self.stats.text_keyframes += 1
            self.stats.text_sightings += len(texts)
        self.stats.frames_processed += 1
        return Seen(stamp, rgb.shape[1], rgb.shape[0], objects, texts)

    def _objects(self, rgb: np.ndarray, stamp: float) -> list[ObjectSighting]:
        out = []
        for track in self.tracker.update(self.detector.detect(rgb), rgb, stamp):
            crop = b""
            if track.best_crop.size and track.best_confidence > self._crop_sent.get(track.object_id, -1.0):
                crop = encode_jpeg(track.best_crop, CROP_JPEG_QUALITY)
                self._crop_sent[track.object_id] = track.best_confidence
            out.append(
                ObjectSighting(
                    track.object_id, track.label, track.confidence, track.box, track.first_seen, track.last_seen, crop
                )
            )
        return out

    def _texts(self, rgb: np.ndarray, stamp: float) -> list[TextSighting]:
        return [
            TextSighting(
                s.region.region_id,
                s.region.text,
                s.region.confidence,
                (s.line.x, s.line.y, s.line.w, s.line.h),
                s.region.first_seen,
                s.region.last_seen,
                s.new,
            )
            for s in self.regions.update(self.reader.read(rgb), stamp)
        ]


class SeeingWorker:
    """Runs a Seeing on a thread of its own with one frame slot (the latest frame waits, older ones
    are dropped and counted). `on_seen` gets each frame's results; `on_error` a failure (work goes on)."""

    def __init__(
        self, seeing: Seeing, on_seen: Callable[[Seen], None], on_error: Callable[[str, Exception], None]
    ) -> None:
        self.seeing, self.on_seen, self.on_error = seeing, on_seen, on_error
        self.stats = seeing.stats
        self._ready = threading.Condition(threading.Lock())
        self._slot: tuple[float, np.ndarray] | None = None
        self._busy = False
        self._stop = threading.Event()
        self._input_until = float("-inf")  # the last frame given or passed over (rate, decode failure)
        self._done_until = float("-inf")  # the last frame processed
        self._thread = threading.Thread(target=self._loop, name="m3_seeing", daemon=True)
        self._thread.start()

    def frame_wanted(self, stamp: float) -> bool:
        """The rate limit; a frame passed over counts as done (it never holds progress back)."""
        wanted = self.seeing.frame_wanted(stamp)
        if not wanted:
            self.discarded(stamp)
        return wanted

    def discarded(self, stamp: float) -> None:
        """A wanted frame that will never come (its decode failed): done, as for faces."""
        with self._ready:
            self._input_until = max(self._input_until, stamp)

    def submit(self, stamp: float, rgb: np.ndarray) -> None:
        """Cheap (executor thread): the frame takes the slot, replacing one still waiting."""
        with self._ready:
            if self._slot is not None:
                self.stats.frames_dropped += 1
            self._slot = (stamp, rgb)
            self._input_until = max(self._input_until, stamp)
            self._ready.notify()

    def processed_until(self, expected: bool = False) -> float:
        """Stream time up to which every frame seeing was given is processed (its bound on the node's
        progress, as PerceptionEngine.processed_until's for faces); +inf (no bound) before any frame
        unless frames are `expected` (a camera publisher is matched)."""
        with self._ready:
            if self._input_until == float("-inf") and not expected:
                return float("inf")
            return self._done_until if self._slot is not None or self._busy else self._input_until

    def idle(self) -> bool:
        with self._ready:
            return self._slot is None and not self._busy

    def close(self) -> None:
        self._stop.set()
        with self._ready:
            self._ready.notify_all()
        self._thread.join(timeout=10.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._ready:
                while self._slot is None and not self._stop.is_set():
                    self._ready.wait(0.5)
                if self._stop.is_set():
                    return
                stamp, rgb = self._slot  # type: ignore[misc]
                self._slot = None
                self._busy = True
            try:
                self.on_seen(self.seeing.process(rgb, stamp))
            except Exception as e:  # noqa: BLE001 - a bad frame must never stop the node
                self.on_error("object or text processing failed", e)
            finally:
                with self._ready:
                    self._done_until = max(self._done_until, stamp)  # done with it, even when it failed
                    self._busy = False
