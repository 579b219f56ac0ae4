"""Engine scheduling without ROS: stream-time rate limit, frame drops while busy, errors survive.

The face pipeline here is a slow stand-in object (the real one is covered in test_faces and the
DDS test); what is checked is the engine's own scheduling.
"""

import contextlib
import threading
import time
from collections.abc import Iterator

import numpy as np

from m3_perception.engine import EngineCallbacks, PerceptionEngine
from m3_perception.face_voice_matcher import FaceVoiceMatcher
from m3_perception.faces.pipeline import FaceObs
from m3_perception.identity_clusters import IdentityClusters


class SlowFaces:
    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.clusters = IdentityClusters("face", 0.4)
        self.stamps: list[float] = []

    def process(self, rgb: np.ndarray, stamp: float) -> list[FaceObs]:
        self.gate.wait(5.0)
        if rgb.shape[0] == 1:
            raise RuntimeError("broken frame")
        self.stamps.append(stamp)
        return []


def _engine(faces, errors: list, rate: float = 5.0) -> PerceptionEngine:
    cb = EngineCallbacks(
        on_faces=lambda *a: None,
        on_voice=lambda e: None,
        on_match=lambda c: None,
        on_identities=lambda *a: None,
        on_error=lambda what, e: errors.append((what, str(e))),
    )
    return PerceptionEngine(faces, None, FaceVoiceMatcher(), cb, face_rate_hz=rate)


IMG = np.zeros((4, 4, 3), np.uint8)


@contextlib.contextmanager
def _running(
    open_gate: bool, errors: list | None = None
) -> Iterator[tuple[PerceptionEngine, SlowFaces, threading.Event]]:
    """An engine over SlowFaces; the gate starts open or closed; the engine is closed at the end."""
    gate = threading.Event()
    if open_gate:
        gate.set()
    faces = SlowFaces(gate)
    eng = _engine(faces, [] if errors is None else errors)
    try:
        yield eng, faces, gate
    finally:
        eng.close()


def _wait_idle(engine: PerceptionEngine) -> None:
    end = time.monotonic() + 5.0
    while not engine.idle() and time.monotonic() < end:
        time.sleep(0.01)


def test_rate_limit_on_stream_time() -> None:
    with _running(True) as (eng, faces, _gate):
        for k in range(10):  # 10 frames at 20 Hz stream time → 5 Hz keeps every 4th
            t = 100.0 + k * 0.05
            if eng.frame_wanted(t):
                eng.submit_frame(t, IMG)
                _wait_idle(eng)
        assert faces.stamps == [100.0, 100.2, 100.4]
        assert eng.stats.frames_skipped_rate == 7 and eng.stats.frames_dropped == 0


def test_frames_dropped_while_busy_and_errors_do_not_stop_work() -> None:
    errors: list = []
    with _running(False, errors) as (eng, faces, gate):
        eng.submit_frame(1.0, IMG)
        time.sleep(0.2)  # the worker has taken frame 1.0 and waits on the gate
        for t in (2.0, 3.0, 4.0):
            eng.submit_frame(t, IMG)  # 2.0 and 3.0 are replaced by newer frames
        gate.set()
        _wait_idle(eng)
        assert faces.stamps == [1.0, 4.0] and eng.stats.frames_dropped == 2
        eng.submit_frame(5.0, np.zeros((1, 4, 3), np.uint8))
        _wait_idle(eng)
        eng.submit_frame(6.0, IMG)
        _wait_idle(eng)
        assert errors == [("face processing failed", "broken frame")] and faces.stamps[-1] == 6.0


def test_progress_never_covers_a_frame_still_being_decoded() -> None:
    """A player pacing on processed_until sends the next frame only once this one is queued.

    Before, the input advanced when the frame was admitted, before its decode: a progress tick
    in between let the player send the next frame, which replaced this one in the slot (seen in
    CI as 75 of 76 frames under keep-up replay).
    """
    with _running(False) as (eng, faces, gate):
        assert eng.frame_wanted(10.0)
        eng.submit_frame(10.0, IMG)
        gate.set()
        _wait_idle(eng)
        assert eng.processed_until() == 10.0
        assert eng.frame_wanted(10.2)  # admitted, now being decoded by the executor thread
        assert eng.processed_until() == 10.0  # not 10.2: that frame is not queued yet
        eng.frame_discarded(10.2)  # its decode failed: it will never be processed, so it is done
        assert eng.processed_until() == 10.2
        assert not eng.frame_wanted(10.3)  # skipped by the rate limit: done at once
        assert eng.processed_until() == 10.3
        gate.clear()
        assert eng.frame_wanted(10.4)
        eng.submit_frame(10.4, IMG)
        assert eng.processed_until() < 10.4  # queued or in the worker: not done
        gate.set()
        _wait_idle(eng)
        assert eng.processed_until() == 10.4
        assert faces.stamps == [10.0, 10.4]


def test_a_stream_someone_publishes_on_holds_progress_before_its_first_input() -> None:
    """The player's first frame still in transit while its audio is processed: progress must not pass
    it, or the player sends the second frame, which can replace the first in the slot (CI: 81 of 82)."""
    with _running(True) as (eng, _faces, _gate):
        eng.submit_audio(0.0, np.zeros(4800, np.float32))  # 0.0 .. 0.3 s, done at once
        _wait_idle(eng)
        assert eng.processed_until() == 0.3  # no camera publisher: audio alone bounds it
        assert eng.processed_until(expected=(True, True)) == float("-inf")  # the first frame is still coming
        assert eng.frame_wanted(0.0)
        eng.submit_frame(0.0, IMG)
        _wait_idle(eng)
        assert eng.processed_until(expected=(True, True)) == 0.0


def test_an_idle_stream_holds_progress_at_its_own_last_input() -> None:
    """Audio processed past the last frame does not carry the frames along: the next frame may be
    in transit (or waiting for the executor) while later audio is processed, and a player told
    "processed until" the audio's end would send the frame after it, which would replace it."""
    with _running(True) as (eng, _faces, _gate):
        assert eng.processed_until() == float("-inf")
        assert eng.frame_wanted(1.0)
        eng.submit_frame(1.0, IMG)
        _wait_idle(eng)
        eng.submit_audio(1.0, np.zeros(3200, np.float32))  # 1.0 .. 1.2 s: no voice pipeline, done at once
        _wait_idle(eng)
        assert eng.processed_until() == 1.0  # not 1.2: the frames have reached 1.0 only
        assert eng.frame_wanted(1.2)
        eng.submit_frame(1.2, IMG)
        _wait_idle(eng)
        assert eng.processed_until() == 1.2
