"""The seeing logic without ROS: stream-time rate limit, crops only when they change, the text keyframe
gate, the worker's one-frame slot (drops counted), errors survived, and bad parameter values named.

Stand-in detector and reader (the real ones are covered by test_objects, test_ocr and the DDS test)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from m3_perception.assembly import build_seeing
from m3_perception.node_parameters import PARAMETERS
from m3_perception.objects.detection import Detection
from m3_perception.seeing import Seeing, SeeingParams, SeeingWorker
from m3_perception.text.lines import TextLine

FRAME = np.zeros((120, 160, 3), np.uint8)
FRAME[20:80, 30:90] = (200, 60, 40)  # a red "object"


class FakeDetector:
    name = "fake"
    labels = ("cup",)

    def __init__(self, confidences: list[float], gate: threading.Event | None = None) -> None:
        self.confidences, self.gate, self.calls = list(confidences), gate, 0
        self.entered = threading.Event()

    def detect(self, rgb: np.ndarray) -> list[Detection]:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(5.0)
        if rgb.shape[0] == 1:
            raise RuntimeError("broken frame")
        conf = self.confidences[min(self.calls, len(self.confidences) - 1)]
        self.calls += 1
        return [Detection("cup", conf, 30, 20, 60, 60)]


class FakeReader:
    backend = "fake"

    def __init__(self) -> None:
        self.calls = 0

    def read(self, rgb: np.ndarray) -> list[TextLine]:
        self.calls += 1
        return [TextLine("EXIT", 0.95, ((10, 90), (60, 90), (60, 110), (10, 110)), 10, 90, 50, 20)]


def test_rate_limit_on_stream_time() -> None:
    seeing = Seeing(FakeDetector([0.5]), None, SeeingParams(rate_hz=2.0))
    wanted = [t for t in np.arange(0.0, 3.0, 0.1).round(2) if seeing.frame_wanted(float(t))]
    assert wanted == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert seeing.stats.frames_skipped_rate == 24
    assert seeing.frame_wanted(0.1), "a stamp going back (a replay restarted) is taken"


def test_crop_only_when_the_best_sighting_changes() -> None:
    seeing = Seeing(FakeDetector([0.5, 0.4, 0.7, 0.6]), None)
    crops = []
    for k in range(4):
        seen = seeing.process(FRAME, 10.0 + k)
        assert seen.texts is None and seen.width == 160 and seen.height == 120
        (obj,) = seen.objects
        assert obj.object_id == "object_1" and obj.label == "cup" and obj.first_seen == 10.0
        assert obj.last_seen == 10.0 + k and obj.box == (30, 20, 60, 60)
        crops.append(obj.crop_jpeg)
    assert [bool(c) for c in crops] == [True, False, True, False]
    assert crops[0][:2] == b"\xff\xd8" and crops[0][-2:] == b"\xff\xd9"
    assert seeing.stats.object_sightings == 4 and len(seeing.stats.object_ms) == 4


def test_text_read_on_keyframes_only() -> None:
    reader = FakeReader()
    seeing = Seeing(None, reader, SeeingParams(text_interval_s=5.0, text_min_gap_s=1.0))
    read = [t for t in range(12) if seeing.process(FRAME, 100.0 + t).texts is not None]
    assert read == [0, 5, 10] and reader.calls == 3  # the view never changes: every interval
    changed = FRAME.copy()
    changed[:] = 255
    seen = seeing.process(changed, 111.5)  # a changed view, 1.5 s after the last read
    assert seen.objects is None and seen.texts is not None
    first = seeing.process(FRAME, 100.0).texts  # stream time went back: read again
    regions = {r.region_id for r in first}
    assert regions == {"text_1"} and first[0].text == "EXIT" and not first[0].is_new
    assert seeing.stats.text_keyframes == 5


def test_worker_keeps_the_latest_frame_and_counts_drops() -> None:
    gate = threading.Event()
    seen, errors = [], []
    detector = FakeDetector([0.5], gate)
    worker = SeeingWorker(Seeing(detector, None), seen.append, lambda w, e: errors.append(str(e)))
    try:
        worker.submit(1.0, FRAME)
        assert detector.entered.wait(5.0)  # the worker took frame 1 and waits in detect
        for t in (2.0, 3.0, 4.0):  # frames 2 and 3 are replaced while the worker is busy
            worker.submit(t, FRAME)
        worker.submit(4.5, FRAME[:1])  # broken: replaces 4.0, fails, the worker goes on
        gate.set()
        deadline = time.monotonic() + 5
        while not worker.idle() and time.monotonic() < deadline:
            time.sleep(0.01)
        worker.submit(6.0, FRAME)
        while (len(seen) < 2 or not worker.idle()) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        worker.close()
    assert [s.stamp for s in seen] == [1.0, 6.0]
    assert worker.stats.frames_dropped == 3 and worker.stats.frames_processed == 2
    assert errors == ["broken frame"]


def _params(**changes) -> dict:
    return {**{name: row[0] for name, row in PARAMETERS.items()}, **changes}


def test_both_off_loads_nothing() -> None:
    assert build_seeing(_params(object_backend="none", text_backend="none")) is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"object_backend": "yolo9"}, r"object_backend must be one of \('yolov3_tiny', 'onnx', 'none'\), got 'yolo9'"),
        ({"text_backend": "tesseract"}, "text_backend must be one of"),
        ({"text_min_gap_s": 6.0}, r"text_min_gap_s \(6.0\) must be in \[0, text_interval_s \(5.0\)\]"),
        ({"object_backend": "onnx"}, "object_backend 'onnx': the onnx object detector needs model_path"),
        ({"object_classes": ["cup", 3]}, "object_classes must be a list of class names"),
    ],
)
def test_bad_values_named(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_seeing(_params(**changes))


def test_missing_onnx_model_named(tmp_path) -> None:
    from m3_perception.model_files import ModelFileMissing

    with pytest.raises(ModelFileMissing, match=r"absent\.onnx"):
        build_seeing(_params(object_backend="onnx", object_model_path=str(tmp_path / "absent.onnx")))


def test_an_empty_list_in_a_params_file_is_the_empty_default() -> None:
    """rcl's params-file parser reads `object_classes: []` (config/m3.yaml) as not set: that is the empty list."""
    from m3_runtime.parameter_checks import ParameterError, checked_value

    row = PARAMETERS["object_classes"]
    assert checked_value("object_classes", None, row) == []
    assert checked_value("object_classes", ["cup"], row) == ["cup"]
    with pytest.raises(ParameterError, match="'object_classes' must be a list, got string 'cup'"):
        checked_value("object_classes", "cup", row)


def test_the_worker_bounds_progress_until_its_frames_are_processed():
    """Keep-up replay waits for seeing as for faces: a frame it was given holds progress back until it is
    processed; frames passed over by the rate, or that failed to decode, hold nothing back."""
    gate = threading.Event()
    detector = FakeDetector([0.5, 0.5], gate)
    worker = SeeingWorker(Seeing(detector, None, SeeingParams(rate_hz=2.0)), lambda _s: None, lambda w, e: None)
    try:
        assert worker.processed_until() == float("inf")  # no camera, nothing given: no bound
        assert worker.processed_until(expected=True) == float("-inf")  # a camera is publishing: wait for it
        assert worker.frame_wanted(1.0)
        worker.submit(1.0, FRAME)
        assert detector.entered.wait(5.0)
        assert worker.processed_until() == float("-inf")  # frame 1.0 is being processed
        assert not worker.frame_wanted(1.2)  # passed over by the 2 Hz rate: done at once...
        assert worker.processed_until() == float("-inf")  # ...but 1.0 still holds progress
        gate.set()
        deadline = time.monotonic() + 5
        while not worker.idle() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.processed_until() == 1.2
        assert worker.frame_wanted(1.5)
        worker.discarded(1.5)  # its decode failed
        assert worker.processed_until() == 1.5
    finally:
        worker.close()
