"""The `rapidocr` back-end: PP-OCRv6 small detector + recogniser (ONNX) from the rapidocr wheel.

rapidocr downloads a model it cannot find at its default place; here every model path is given
explicitly, inside the installed wheel, so it never reaches the network: a missing file is a
ModelFileMissing that says how to get it. The recogniser's alphabet is read from the ONNX
model's metadata (checked at load), which is the other thing rapidocr would otherwise download.
PP-OCRv6's recogniser is multilingual (Chinese, English and some 50 Latin-script languages).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from m3_perception.model_files import ModelFileMissing, package_dir, require_file
from m3_perception.text.lines import TextLine, check_frame, reading_scale, rescale

PACKAGE = "rapidocr"
# The detector sometimes boxes a whole textured frame as one "line" (skimage's coffee photo:
# the full 640x480 frame at 0.75, read as "8" at 0.97); real lines never cover half a frame.
MAX_LINE_AREA_FRACTION = 0.5
SETUP_HINT = "install it with `bash bootstrap.sh setup` (tools/requirements-nodeps.txt)"
MODEL_FILES = {
    "Det": "models/PP-OCRv6_det_small.onnx",
    "Cls": "models/ch_ppocr_mobile_v2.0_cls_mobile.onnx",
    "Rec": "models/PP-OCRv6_rec_small.onnx",
}


def packaged_models() -> dict[str, Path]:
    """The three ONNX files inside the installed rapidocr wheel, or ModelFileMissing."""
    try:
        root = package_dir(PACKAGE)
    except ModelFileMissing as e:
        raise ModelFileMissing(f"{e}; {SETUP_HINT}") from None
    found = {}
    for stage, relative in MODEL_FILES.items():
        try:
            found[stage] = require_file(root / relative, f"{PACKAGE} {stage.lower()}")
        except ModelFileMissing as e:
            raise ModelFileMissing(f"{e} (package {PACKAGE!r}); {SETUP_HINT}") from None
    return found


class RapidOcrReader:
    """TextReader on rapidocr; the models load in the constructor so a broken install fails early."""

    backend = "rapidocr"

    def __init__(
        self,
        *,
        min_confidence: float = 0.8,
        max_side_px: int = 960,
        min_side_px: int = 0,
        threads: int = 2,
        upright_check: bool = True,
    ) -> None:
        models = packaged_models()
        try:
            import onnxruntime  # noqa: F401  (rapidocr's engine; named here so its absence is clear)
            from rapidocr import RapidOCR
        except ImportError as e:
            raise ModelFileMissing(f"{PACKAGE} or a dependency is not importable ({e}); {SETUP_HINT}") from e
        # These three may be changed between reads (they are applied per frame).
        self.min_confidence = min_confidence
        self.max_side_px = max_side_px
        self.min_side_px = min_side_px
        params = {
            "Global.log_level": "error",  # it warns on every frame without text
            "Global.text_score": min_confidence,
            "Global.use_cls": upright_check,
            # read() resizes the frame itself (reading_scale); rapidocr must not resize again: its
            # detector default upscales the short side to 736 px, 1.6x the work on 640x480.
            "Global.max_side_len": 4096,
            "Det.limit_type": "max",
            "Det.limit_side_len": 4096,
            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
        for stage, path in models.items():
            params[f"{stage}.model_path"] = str(path)
        self._engine = RapidOCR(params=params)
        # rapidocr loads lazily on the first frame with text; load now so errors surface at configure.
        self._engine._load_det_model()
        if upright_check:
            self._engine._load_cls_model()
        rec = self._engine._load_rec_model()
        if not rec.session.have_key():
            raise ModelFileMissing(f"{models['Rec']} has no character list in its metadata; {SETUP_HINT}")
        self._lock = threading.Lock()  # one inference at a time: the sessions share scratch state

    def read(self, rgb_frame: np.ndarray) -> list[TextLine]:
        """Text lines in the frame, confidence >= min_confidence, top to bottom; none covering
        more than half the frame."""
        check_frame(rgb_frame)
        height, width = rgb_frame.shape[:2]
        scale = reading_scale(height, width, self.max_side_px, self.min_side_px)
        bgr = np.ascontiguousarray(rescale(rgb_frame, scale)[:, :, ::-1])  # rapidocr takes arrays as BGR
        with self._lock:
            result = self._engine(bgr, text_score=self.min_confidence)
        # Without text rapidocr returns an empty output, or a detector-only one when recognition failed.
        boxes, txts, scores = (getattr(result, name, None) for name in ("boxes", "txts", "scores"))
        if boxes is None or txts is None or scores is None:
            return []
        lines = []
        for quad, text, score in zip(boxes, txts, scores, strict=True):
            text = str(text).strip()
            if not text or float(score) < self.min_confidence:
                continue
            line = TextLine.from_quad(text, float(score), np.asarray(quad) / scale, width, height)
            if line.w * line.h <= MAX_LINE_AREA_FRACTION * width * height:
                lines.append(line)
        lines.sort(key=lambda line: (line.y, line.x))
        return lines
