"""Speaker embedding with resemblyzer's pretrained GE2E model (256-d, unit norm).

`VoiceEncoder.encode` is public API: the memory package uses it for audio queries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3_perception.model_files import packaged_file, require_file

EMBEDDING_MODEL = "resemblyzer"
MIN_SAMPLES = 16000 // 4  # resemblyzer needs at least a few 10 ms mel frames; below ¼ s it is noise


class VoiceEncoder:
    """Embed one utterance (mono float32 16 kHz) into a unit float32 256-d vector."""

    def __init__(self, weights: str | Path = "", device: str = "cpu") -> None:
        from resemblyzer import VoiceEncoder as _Resemblyzer

        path = (
            require_file(weights, "resemblyzer speaker")
            if weights
            else packaged_file("resemblyzer", "pretrained.pt", "resemblyzer speaker")
        )
        self._model = _Resemblyzer(device, verbose=False, weights_fpath=path)

    def encode(self, samples: np.ndarray) -> np.ndarray:
        x = np.asarray(samples, dtype=np.float32)
        if x.ndim != 1:
            raise ValueError(f"expected mono samples (1-D), got shape {x.shape}")
        if len(x) < MIN_SAMPLES:
            raise ValueError(f"utterance too short for a speaker embedding: {len(x)} samples < {MIN_SAMPLES}")
        if not np.all(np.isfinite(x)):
            raise ValueError("samples contain NaN or infinite values")
        v = np.asarray(self._model.embed_utterance(x), dtype=np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-12)
