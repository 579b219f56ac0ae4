"""A small labelled set of real photographs shipped in installed packages, and precision/recall at
IoU 0.5, for a future `m3 bench perception`.

Why these photos: they are on every machine after set-up (scikit-image, matplotlib), so a figure is
reproducible offline. Boxes (x, y, w, h in pixels, COCO classes under Darknet's names) were drawn by
eye on the images; they are approximate, which IoU 0.5 tolerates. Only objects of COCO classes are
labelled (the astronaut's helmet and the shuttle model are none).

    python -m m3_perception.objects.photo_set          # prints the figures of the default detector
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from m3_perception.objects.detection import Detection, ObjectDetector
from m3_perception.objects.tracker import iou_matrix

Box = tuple[int, int, int, int]

LABELS: dict[str, list[tuple[str, Box]]] = {
    "astronaut": [("person", (10, 15, 350, 497))],
    "chelsea": [("cat", (0, 0, 440, 300))],
    "coffee": [("cup", (175, 15, 235, 265)), ("spoon", (320, 65, 100, 260))],
    "grace_hopper": [("person", (0, 25, 512, 575)), ("tie", (216, 410, 80, 100))],
    "motorcycle": [("motorbike", (95, 90, 600, 365)), ("bench", (30, 105, 255, 175)), ("bicycle", (0, 140, 40, 90))],
    "rocket": [],
}


def _image(name: str) -> np.ndarray:
    import skimage.data

    if name in ("astronaut", "chelsea", "coffee", "rocket"):
        return getattr(skimage.data, name)()
    import cv2

    if name == "grace_hopper":
        import matplotlib

        path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    else:
        path = Path(skimage.data.__file__).parent / "motorcycle_left.png"
    return cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)


PHOTOS: dict[str, Callable[[], np.ndarray]] = {name: (lambda n=name: _image(n)) for name in LABELS}


def match(found: list[Detection], truth: list[tuple[str, Box]], iou: float = 0.5) -> tuple[int, int, int]:
    """True positives, false positives, false negatives: each labelled object matches at most one
    detection of its class (greedy, most confident first) with IoU >= `iou`."""
    used: set[int] = set()
    tp = 0
    for d in sorted(found, key=lambda d: -d.confidence):
        best, best_iou = None, iou
        for i, (label, box) in enumerate(truth):
            if i in used or label != d.label:
                continue
            overlap = float(iou_matrix(np.array([d.box], float), np.array([box], float))[0, 0])
            if overlap >= best_iou:
                best, best_iou = i, overlap
        if best is not None:
            used.add(best)
            tp += 1
    return tp, len(found) - tp, len(truth) - tp


def evaluate(detector: ObjectDetector, iou: float = 0.5) -> dict:
    """Precision and recall over the set, per class (classes labelled or detected) and overall, with
    each photo's detections and the mean milliseconds per frame."""
    per_class: dict[str, list[int]] = {}
    photos, elapsed = {}, 0.0
    for name, load in PHOTOS.items():
        image = load()
        start = time.perf_counter()
        found = detector.detect(image)
        elapsed += time.perf_counter() - start
        photos[name] = [(d.label, round(d.confidence, 2), d.box) for d in found]
        for label in {d.label for d in found} | {t[0] for t in LABELS[name]}:
            tp, fp, fn = match([d for d in found if d.label == label], [t for t in LABELS[name] if t[0] == label], iou)
            counts = per_class.setdefault(label, [0, 0, 0])
            counts[0], counts[1], counts[2] = counts[0] + tp, counts[1] + fp, counts[2] + fn
    tp, fp, fn = (sum(c[i] for c in per_class.values()) for i in range(3))

    def figures(tp: int, fp: int, fn: int) -> dict:
        return {"precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None}

    return {
        "overall": {**figures(tp, fp, fn), "tp": tp, "fp": fp, "fn": fn},
        "classes": {label: figures(*c) for label, c in sorted(per_class.items())},
        "photos": photos,
        "ms_per_frame": 1000 * elapsed / len(PHOTOS),
    }


if __name__ == "__main__":
    import json

    from m3_perception.objects.detectors import make_detector

    print(json.dumps(evaluate(make_detector()), indent=1))
