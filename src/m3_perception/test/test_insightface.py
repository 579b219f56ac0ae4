"""InsightFace buffalo_l back-end (SCRFD-10G + ArcFace R50) with stand-in ONNX models.

Real buffalo_l weights are not available here (no network). The tests therefore build stand-in
ONNX files in tmp_path with the real files' names, input/output names and shapes:
- det_10g.onnx: input 'input.1' [1, 3, ?, ?]; outputs '448' '471' '494' (scores [12800|3200|800, 1]),
  '451' '474' '497' (box distances [.., 4]), '454' '477' '500' (keypoints [.., 10]), constant
  tensors with planted detections, so the decoding (anchors, strides, letterbox scale, threshold,
  NMS) is checked exactly;
- w600k_r50.onnx: input 'input.1' [N, 3, 112, 112] -> output '683' [N, 512], a fixed random linear
  map of the 14x14-pooled input, so the alignment, normalisation and channel order are checked
  against a numpy reference.
They prove the pre/post-processing and the drop-in interface, not detection or recognition quality.
The alignment is checked on a real photograph (skimage's astronaut) with dlib's 68 landmarks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_graphs as g
import pytest

from m3_perception.faces.face_encoder import FaceDetection
from m3_perception.faces.insightface_encoder import (
    ARCFACE_TEMPLATE,
    DETECTOR_FILE,
    RECOGNIZER_FILE,
    InsightFaceEncoder,
    InsightFaceModelError,
    alignment_matrix,
    choose_providers,
    letterbox,
    norm_crop,
)
from m3_perception.faces.pipeline import FaceParams, FacePipeline
from m3_perception.model_files import ModelFileMissing

SCORE_NAMES, BOX_NAMES, KPS_NAMES = ("448", "471", "494"), ("451", "474", "497"), ("454", "477", "500")
ROWS = {8: 12800, 16: 3200, 32: 800}
# Planted detections: (stride, row, col, anchor, score, (l, t, r, b), keypoint offsets), in stride units.
KPS_OFFSETS = np.array([[-1.0, -1.0], [1.0, -1.0], [0.0, 0.2], [-0.8, 1.2], [0.8, 1.2]], np.float32)
PLANTED = [
    (16, 12, 15, 1, 0.9, (3.0, 4.0, 2.5, 3.5), KPS_OFFSETS),  # the face
    (16, 12, 15, 0, 0.8, (3.2, 4.0, 2.5, 3.4), KPS_OFFSETS),  # same face, other anchor: NMS removes it
    (8, 30, 20, 0, 0.7, (4.0, 4.0, 4.0, 4.0), KPS_OFFSETS * 2),  # a second, smaller face elsewhere
    (32, 3, 3, 0, 0.3, (1.0, 1.0, 1.0, 1.0), KPS_OFFSETS),  # below the 0.5 threshold
]
W_REC = np.random.default_rng(7).normal(size=(3 * 8 * 8, 512)).astype(np.float32)


def _expected(stride: int, row: int, col: int, dist: tuple[float, ...], kps: np.ndarray, scale: float):
    """Box (x, y, w, h) and keypoints in image pixels, computed by hand from the planted values."""
    cx, cy = col * stride, row * stride
    left, top, right, bottom = (v * stride for v in dist)
    box = np.array([cx - left, cy - top, left + right, top + bottom]) / scale
    return box, (np.array([cx, cy]) + kps * stride) / scale


def _det_model(planted=PLANTED, rows=ROWS) -> bytes:
    outs = {}
    for stride in (8, 16, 32):
        n = rows[stride]
        outs[stride] = [np.zeros((n, 1), np.float32), np.zeros((n, 4), np.float32), np.zeros((n, 10), np.float32)]
    for stride, row, col, anchor, score, dist, kps in planted:
        i = (row * (640 // stride) + col) * 2 + anchor
        outs[stride][0][i, 0] = score
        outs[stride][1][i] = dist
        outs[stride][2][i] = kps.reshape(-1)
    names = {8: 0, 16: 1, 32: 2}
    nodes, inits, outputs = [], [], []
    for names_, k in ((SCORE_NAMES, 0), (BOX_NAMES, 1), (KPS_NAMES, 2)):
        for stride, j in names.items():
            arr = outs[stride][k]
            inits.append(g.tensor(f"c{names_[j]}", arr))
            nodes.append(g.node("Identity", [f"c{names_[j]}"], [names_[j]]))
            outputs.append(g.value_info(names_[j], list(arr.shape)))
    return g.model(nodes, [g.value_info("input.1", [1, 3, "?", "?"])], outputs, inits)


def _rec_model() -> bytes:
    pool = g.node(
        "AveragePool", ["input.1"], ["pooled"], g.attr_ints("kernel_shape", [14, 14]), g.attr_ints("strides", [14, 14])
    )
    nodes = [
        pool,
        g.node("Flatten", ["pooled"], ["flat"], g.attr_int("axis", 1)),
        g.node("MatMul", ["flat", "W"], ["683"]),
    ]
    inputs, outputs = [g.value_info("input.1", ["None", 3, 112, 112])], [g.value_info("683", ["None", 512])]
    return g.model(nodes, inputs, outputs, [g.tensor("W", W_REC)])


def _reference_embedding(aligned: np.ndarray) -> np.ndarray:
    x = (aligned.astype(np.float32) - 127.5) / 127.5  # RGB, as the model is fed
    pooled = x.transpose(2, 0, 1).reshape(3, 8, 14, 8, 14).mean(axis=(2, 4)).reshape(-1)
    v = pooled @ W_REC
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("buffalo_l")
    g.save(d / DETECTOR_FILE, _det_model())
    g.save(d / RECOGNIZER_FILE, _rec_model())
    return d


@pytest.fixture(scope="module")
def encoder(model_dir: Path) -> InsightFaceEncoder:
    return InsightFaceEncoder(model_dir)


@pytest.fixture(scope="module")
def astronaut() -> np.ndarray:
    import skimage.data

    return skimage.data.astronaut()


@pytest.fixture(scope="module")
def astronaut_kps(astronaut: np.ndarray) -> np.ndarray:
    """Five ArcFace keypoints of the astronaut's face: eye centres, nose tip, mouth corners (dlib 68)."""
    import dlib

    from m3_perception.model_files import packaged_file

    predictor = dlib.shape_predictor(
        str(packaged_file("face_recognition_models", "models/shape_predictor_68_face_landmarks.dat", "dlib 68"))
    )
    shape = predictor(astronaut, dlib.rectangle(175, 76, 265, 166))  # dlib's HOG box of her face
    p = np.array([[q.x, q.y] for q in shape.parts()], np.float64)
    return np.array([p[36:42].mean(0), p[42:48].mean(0), p[30], p[48], p[54]])


@pytest.mark.parametrize("shape", [(384, 512), (400, 300)])  # wide (scale 1.25) and tall (scale 1.6)
def test_planted_detections_decode_to_expected_boxes_and_keypoints(encoder, shape) -> None:
    rgb = np.full((*shape, 3), 90, np.uint8)
    dets = encoder.detect(rgb)
    scale = 640 / max(shape)
    # Two faces survive: the 0.3 one is below the threshold, the 0.8 one overlaps the 0.9 one (NMS).
    assert [round(d.score, 3) for d in dets] == [0.9, 0.7]
    for det, (stride, row, col, _, _, dist, kps) in zip(dets, [PLANTED[0], PLANTED[2]], strict=True):
        box, points = _expected(stride, row, col, dist, kps, scale)
        assert isinstance(det, FaceDetection) and det.embedding.size == 0
        np.testing.assert_allclose(det.box, box, atol=1e-3)
        np.testing.assert_allclose(det.kps, points, atol=1e-3)


def test_letterbox_blob_is_top_left_and_normalised() -> None:
    rgb = np.zeros((100, 200, 3), np.uint8)
    rgb[..., 0] = 255  # pure red
    blob, scale = letterbox(rgb)
    assert blob.shape == (1, 3, 640, 640) and blob.dtype == np.float32 and scale == pytest.approx(3.2)
    # Image rows 0..319 hold the picture (RGB order kept), the rest is zero padding: (0 - 127.5) / 128.
    assert blob[0, 0, 100, 100] == pytest.approx((255 - 127.5) / 128)
    assert blob[0, 1, 100, 100] == pytest.approx(-127.5 / 128)
    assert np.all(blob[0, :, 320:, :] == np.float32(-127.5 / 128))


def test_face_below_min_size_is_dropped(model_dir: Path) -> None:
    # At letterbox scale 1.25 the stride-8 face is 64 / 1.25 = 51 px wide, the other one 88 / 1.25 = 70 px.
    enc = InsightFaceEncoder(model_dir, min_face_px=60)
    dets = enc.detect(np.zeros((384, 512, 3), np.uint8))
    assert [round(d.score, 3) for d in dets] == [0.9]


def test_embedding_matches_reference_on_aligned_crop(encoder, astronaut, astronaut_kps) -> None:
    det = encoder.detect(astronaut)[0]
    det.kps = astronaut_kps  # the stand-in detector's keypoints are planted, not hers: use real ones
    emb = encoder.embed(astronaut, det)
    assert emb.shape == (512,) and emb.dtype == np.float32
    assert float(np.linalg.norm(emb)) == pytest.approx(1.0, abs=1e-5)
    ref = _reference_embedding(norm_crop(astronaut, astronaut_kps))
    np.testing.assert_allclose(emb, ref, atol=1e-5)
    # Channel order matters: the same crop fed as BGR gives another vector.
    bgr_ref = _reference_embedding(norm_crop(astronaut, astronaut_kps)[..., ::-1])
    assert float(emb @ bgr_ref) < 0.999


def test_alignment_on_real_photograph(astronaut, astronaut_kps) -> None:
    m = alignment_matrix(astronaut_kps)
    mapped = astronaut_kps @ m[:, :2].T + m[:, 2]
    # Her landmarks land near ArcFace's template (a similarity cannot fit 5 points exactly: she smiles,
    # her mouth corners are 7 px from the template's), in the same left/right order.
    err = np.linalg.norm(mapped - ARCFACE_TEMPLATE, axis=1)
    assert float(err.max()) < 8.0 and float(err[:3].max()) < 5.0
    assert mapped[0, 0] < mapped[2, 0] < mapped[1, 0] and mapped[3, 0] < mapped[4, 0]
    # It is the least-squares similarity: no worse than OpenCV's robust estimate of the same transform.
    import cv2

    m_cv, _ = cv2.estimateAffinePartial2D(astronaut_kps, ARCFACE_TEMPLATE.astype(np.float64), method=cv2.LMEDS)
    err_cv = np.linalg.norm(astronaut_kps @ m_cv[:, :2].T + m_cv[:, 2] - ARCFACE_TEMPLATE, axis=1)
    assert float((err**2).sum()) <= float((err_cv**2).sum()) + 1e-6
    crop = norm_crop(astronaut, astronaut_kps)
    assert crop.shape == (112, 112, 3) and crop.dtype == np.uint8

    # The same face rotated by 20 degrees, scaled 0.7 and moved aligns to (nearly) the same crop.
    rot = cv2.getRotationMatrix2D((256.0, 256.0), 20.0, 0.7)
    rot[:, 2] += (30.0, -20.0)
    moved = cv2.warpAffine(astronaut, rot, (512, 512))
    moved_kps = astronaut_kps @ rot[:, :2].T + rot[:, 2]
    crop2 = norm_crop(moved, moved_kps)
    a, b = crop.astype(np.float32).ravel(), crop2.astype(np.float32).ravel()
    corr = float(np.corrcoef(a, b)[0, 1])
    assert corr > 0.98, corr
    # ...while a crop aligned on wrong keypoints (shifted by 15 px) is clearly different.
    off = norm_crop(astronaut, astronaut_kps + np.array([15.0, 0.0])).astype(np.float32).ravel()
    assert float(np.corrcoef(a, off)[0, 1]) < 0.8


def test_encode_embeds_every_face(encoder, astronaut) -> None:
    dets = encoder.encode(astronaut)
    assert len(dets) == 2
    for d in dets:
        assert d.embedding.shape == (512,) and 0.0 < d.quality <= 1.0
        np.testing.assert_allclose(d.embedding, _reference_embedding(norm_crop(astronaut, d.kps)), atol=1e-5)
    with pytest.raises(ValueError, match="RGB"):
        encoder.encode(np.zeros((10, 10), np.uint8))


def test_embed_needs_keypoints(encoder, astronaut) -> None:
    with pytest.raises(ValueError, match="5 keypoints"):
        encoder.embed(astronaut, FaceDetection(10, 10, 50, 50, 0.9))


def test_drop_in_for_the_face_pipeline(encoder, astronaut) -> None:
    pipe = FacePipeline(encoder, FaceParams(match_distance=0.05))
    first = pipe.process(astronaut, 0.0)
    second = pipe.process(astronaut, 0.2)
    assert [o.face_id for o in first] == ["", ""]  # new identities need two agreeing embeddings
    assert sorted(o.face_id for o in second) == ["face_1", "face_2"]
    assert all(o.embedding.shape == (512,) for o in second)


def test_provider_choice(encoder) -> None:
    assert choose_providers(["CUDAExecutionProvider", "CPUExecutionProvider"]) == [
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ]
    assert choose_providers(["AzureExecutionProvider", "CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    import onnxruntime as ort

    cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    assert encoder.active_providers[0] == ("CUDAExecutionProvider" if cuda else "CPUExecutionProvider")


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ModelFileMissing, match=r"det_10g\.onnx"):
        InsightFaceEncoder(tmp_path)
    g.save(tmp_path / DETECTOR_FILE, _det_model())
    with pytest.raises(ModelFileMissing, match=r"w600k_r50\.onnx"):
        InsightFaceEncoder(tmp_path)
    with pytest.raises(ModelFileMissing, match="insightface_model_dir"):
        InsightFaceEncoder("")


def test_wrong_files_are_refused(tmp_path: Path) -> None:
    g.save(tmp_path / DETECTOR_FILE, _det_model(rows={8: 100, 16: 3200, 32: 800}, planted=[]))
    g.save(tmp_path / RECOGNIZER_FILE, _rec_model())
    enc = InsightFaceEncoder(tmp_path)
    with pytest.raises(InsightFaceModelError, match="not SCRFD"):
        enc.detect(np.zeros((64, 64, 3), np.uint8))
    (tmp_path / RECOGNIZER_FILE).write_bytes(b"not an onnx file")
    with pytest.raises(InsightFaceModelError, match="cannot load"):
        InsightFaceEncoder(tmp_path)


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, msg: str) -> None:
        self.lines.append(("info", msg))

    def warning(self, msg: str) -> None:
        self.lines.append(("warning", msg))


def test_assembly_builds_the_insightface_pipeline(model_dir: Path) -> None:
    from m3_perception.assembly import build_pipelines, face_match_l2
    from m3_perception.perception_node import PARAMETERS

    p = {k: v[0] for k, v in PARAMETERS.items()}
    assert p["face_backend"] == "dlib" and p["insightface_model_dir"] == ""
    p.update(face_backend="insightface", insightface_model_dir=str(model_dir), asr_backend="none")
    log = _Log()
    faces, _, _ = build_pipelines(p, log)
    assert isinstance(faces.encoder, InsightFaceEncoder) and faces.embedding_model == "insightface_w600k_r50"
    # face_match_distance is a cosine distance here: 0.7 (cosine 0.3) is L2 sqrt(1.4) on unit vectors.
    assert face_match_l2("insightface", 0.7) == pytest.approx(np.sqrt(1.4))
    assert face_match_l2("dlib", 0.4) == 0.4
    assert faces.p.match_distance == pytest.approx(face_match_l2("insightface", p["face_match_distance"]))
    assert any(level == "info" and "onnxruntime CPU" in msg for level, msg in log.lines)
    # The dlib default 0.40 kept with insightface is pointed out.
    assert any(level == "warning" and "0.7 is suggested" in msg for level, msg in log.lines)
    with pytest.raises(ValueError, match="face_backend"):
        build_pipelines({**p, "face_backend": "arcface"}, log)
    with pytest.raises(ModelFileMissing, match=r"det_10g\.onnx"):
        build_pipelines({**p, "insightface_model_dir": str(model_dir / "nowhere")}, log)
