"""Kaldi fbank (numpy) and the ERes2NetV2 speaker back-end with stand-in models.

Real ERes2NetV2 weights are not available here (no network). The speaker tests therefore build
stand-in models in tmp_path with the real export's input/output names and shapes ('feature'
[batch, frames, 80] -> 'embedding' [batch, 192]): an ONNX graph written without the `onnx`
package (test/onnx_graphs.py) and a TorchScript module, both a fixed random linear map of the
per-bin maximum over time of the features. They prove the file handling, the features fed
(mean-normalised fbank, [B, T, 80] orientation) and the drop-in interface, not speaker discrimination.
The fbank is checked against properties of Kaldi's definition (frame count, tone in the right
mel bin, scale invariance of the mean-normalised features, silence at the floor).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_graphs as g
import pytest

from m3_perception.model_files import ModelFileMissing
from m3_perception.voices.eres2net_encoder import Eres2NetEncoder, SpeakerModelError, model_format
from m3_perception.voices.fbank import EPSILON, kaldi_fbank, mean_normalised_fbank, mel_banks, povey_window

RATE = 16000
W_SPK = np.random.default_rng(3).normal(size=(80, 192)).astype(np.float32)


def tone(freq: float, seconds: float = 1.0, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


# -- fbank ----------------------------------------------------------------------------------------


def test_fbank_shape_and_frames() -> None:
    x = np.random.default_rng(0).normal(0, 0.1, 16000).astype(np.float32)
    f = kaldi_fbank(x)
    # snip_edges: 1 + (16000 - 400) // 160 frames of 25 ms every 10 ms
    assert f.shape == (98, 80) and f.dtype == np.float32
    assert kaldi_fbank(x[:400]).shape == (1, 80) and kaldi_fbank(x[:559]).shape == (1, 80)
    assert kaldi_fbank(x[:560]).shape == (2, 80)
    np.testing.assert_array_equal(f, kaldi_fbank(x))  # no dither: deterministic
    with pytest.raises(ValueError, match="400 samples"):
        kaldi_fbank(x[:399])
    with pytest.raises(ValueError, match="mono"):
        kaldi_fbank(np.zeros((2, 1000), np.float32))


@pytest.mark.parametrize("freq", [300.0, 1000.0, 3500.0])
def test_tone_energy_lands_in_its_mel_bin(freq: float) -> None:
    f = kaldi_fbank(tone(freq))
    _, centres = mel_banks(80, 512, 16000.0)
    peak = int(np.argmax(f.mean(axis=0)))
    # The loudest bin is the one whose centre is nearest the tone (or its neighbour: bins overlap).
    nearest = int(np.argmin(np.abs(centres - freq)))
    assert abs(peak - nearest) <= 1, (peak, nearest, centres[peak])
    # ...and it stands far above bins an octave away.
    far = int(np.argmin(np.abs(centres - freq * 2)))
    assert f.mean(axis=0)[peak] - f.mean(axis=0)[far] > 5.0


def test_filters_and_window_follow_kaldi() -> None:
    w, centres = mel_banks(80, 512, 16000.0)
    assert w.shape == (80, 257) and np.all(w[:, -1] == 0.0) and np.all(w >= 0) and w.max() <= 1.0
    assert 20.0 < centres[0] < centres[-1] < 8000.0 and np.all(np.diff(centres) > 0)
    win = povey_window(400)
    assert win[0] == 0.0 and win[-1] == pytest.approx(0.0, abs=1e-12) and win.max() == pytest.approx(1.0, abs=1e-4)


def test_silence_floor_and_loudness_invariance() -> None:
    assert np.all(kaldi_fbank(np.zeros(4000, np.float32)) == np.float32(np.log(EPSILON)))
    x = np.random.default_rng(1).normal(0, 0.05, 8000).astype(np.float32) + tone(700.0, 0.5)
    a, b = kaldi_fbank(x), kaldi_fbank(2.0 * x)
    np.testing.assert_allclose(b - a, np.log(4.0), atol=1e-4)  # power spectrum: x2 amplitude = +log 4
    m = mean_normalised_fbank(x)
    np.testing.assert_allclose(m.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(mean_normalised_fbank(2.0 * x), m, atol=1e-4)  # the mean takes the gain out


# -- speaker models ---------------------------------------------------------------------------------


def _reference(samples: np.ndarray) -> np.ndarray:
    v = mean_normalised_fbank(samples).max(axis=0) @ W_SPK
    return v / np.linalg.norm(v)


def _onnx_model(path: Path, mel: int = 80) -> Path:
    nodes = [
        g.node("ReduceMax", ["feature"], ["pooled"], g.attr_ints("axes", [1]), g.attr_int("keepdims", 0)),
        g.node("MatMul", ["pooled", "W"], ["embedding"]),
    ]
    w = W_SPK if mel == 80 else np.zeros((mel, 192), np.float32)
    inputs = [g.value_info("feature", ["batch_size", "frame_num", mel])]
    return g.save(path, g.model(nodes, inputs, [g.value_info("embedding", ["batch_size", 192])], [g.tensor("W", w)]))


def _torchscript_model(path: Path) -> Path:
    import torch

    class StandIn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.from_numpy(W_SPK))

        def forward(self, feature: torch.Tensor) -> torch.Tensor:
            return feature.max(dim=1).values @ self.w

    torch.jit.script(StandIn()).save(str(path))
    return path


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    from m3_perception.material.synthetic import speak

    return speak("my name is bob and i like green tea", "kal")


@pytest.mark.parametrize("kind", ["onnx", "torchscript"])
def test_stand_in_models_embed_the_mean_normalised_fbank(tmp_path: Path, speech: np.ndarray, kind: str) -> None:
    path = _onnx_model(tmp_path / "eres2netv2.onnx") if kind == "onnx" else _torchscript_model(tmp_path / "e.pt")
    assert model_format(path) == kind
    enc = Eres2NetEncoder(path)
    assert enc.dim == 192 and enc.device == "cpu" and enc.embedding_model == "eres2netv2"
    e = enc.encode(speech)
    assert e.shape == (192,) and e.dtype == np.float32 and float(np.linalg.norm(e)) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(e, _reference(speech), atol=1e-4)
    # Without the mean normalisation the input, and so the embedding, would differ.
    raw = kaldi_fbank(speech).max(axis=0) @ W_SPK
    assert float(e @ (raw / np.linalg.norm(raw))) < 0.99
    with pytest.raises(ValueError, match="too short"):
        enc.encode(speech[:1000])
    with pytest.raises(ValueError, match="NaN"):
        enc.encode(np.full(8000, np.nan, np.float32))


def test_checkpoint_without_speakerlab_says_how_to_export(tmp_path: Path) -> None:
    import torch

    state = {"backbone.conv1.weight": torch.zeros(32, 1, 3, 3)}
    torch.save(state, tmp_path / "pretrained_eres2netv2.ckpt")
    torch.save(state, tmp_path / "old.ckpt", _use_new_zipfile_serialization=False)
    for name in ("pretrained_eres2netv2.ckpt", "old.ckpt"):
        with pytest.raises(SpeakerModelError, match=r"export_speaker_embedding_onnx\.py") as err:
            Eres2NetEncoder(tmp_path / name)
        assert "state dict" in str(err.value) and "torch.jit.trace" in str(err.value)


def test_bad_speaker_files(tmp_path: Path) -> None:
    with pytest.raises(ModelFileMissing, match=r"gone\.onnx"):
        Eres2NetEncoder(tmp_path / "gone.onnx")
    with pytest.raises(ModelFileMissing, match="speaker_model"):
        Eres2NetEncoder("")
    (tmp_path / "junk.bin").write_bytes(b"hello, not a model")
    with pytest.raises(SpeakerModelError, match="neither an ONNX model"):
        Eres2NetEncoder(tmp_path / "junk.bin")
    with pytest.raises(SpeakerModelError, match=r"\[batch, frames, 80\]"):
        Eres2NetEncoder(_onnx_model(tmp_path / "mel40.onnx", mel=40))


def test_assembly_builds_the_eres2netv2_pipeline(tmp_path: Path, speech: np.ndarray) -> None:
    from m3_perception.assembly import build_pipelines, build_voice_encoder
    from m3_perception.perception_node import PARAMETERS

    p = {k: v[0] for k, v in PARAMETERS.items()}
    assert p["speaker_backend"] == "campplus"
    p.update(speaker_backend="eres2netv2", speaker_model=str(_onnx_model(tmp_path / "eres2netv2.onnx")))
    lines: list[str] = []

    class Log:
        def info(self, msg: str) -> None:
            lines.append(msg)

        def warning(self, msg: str) -> None:
            lines.append("WARNING " + msg)

    _, voices, _ = build_pipelines({**p, "asr_backend": "none"}, Log())
    assert isinstance(voices.encoder, Eres2NetEncoder) and voices.embedding_model == "eres2netv2"
    assert any("ERes2NetV2 192-d" in m and "onnxruntime CPU" in m for m in lines)
    assert any(m.startswith("WARNING voice_match_cosine 0.45") and "0.6 is suggested" in m for m in lines)
    silence = np.zeros(RATE // 2, np.float32)
    events = voices.feed(np.concatenate([silence, speech, silence, silence]), 0.0) + voices.flush()
    assert [e.voice_id for e in events] == ["voice_1"] and events[0].embedding.shape == (192,)
    lines.clear()
    assert isinstance(build_voice_encoder({**p, "voice_match_cosine": 0.6}, Log()), Eres2NetEncoder)
    assert not any(m.startswith("WARNING") for m in lines)
    with pytest.raises(ValueError, match="speaker_backend"):
        build_voice_encoder({**p, "speaker_backend": "xvector"}, Log())
