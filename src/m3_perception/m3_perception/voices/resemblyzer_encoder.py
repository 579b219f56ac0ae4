"""Speaker embedding with resemblyzer's pretrained GE2E model (256-d, unit norm).

`VoiceEncoder.encode` is public API: the memory package uses it for audio queries.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3_perception.model_files import packaged_file, require_file
from m3_runtime.audio_codec import checked_mono

EMBEDDING_MODEL = "resemblyzer"
MIN_SAMPLES = 16000 // 4  # resemblyzer needs at least a few 10 ms mel frames; below ¼ s it is noise


def checked_utterance(samples: np.ndarray) -> np.ndarray:
    """Samples as mono float32 fit for a speaker embedding (every speaker back-end), else ValueError."""
    x = checked_mono(samples)
    if len(x) < MIN_SAMPLES:
        raise ValueError(f"utterance too short for a speaker embedding: {len(x)} samples < {MIN_SAMPLES}")
    return x


class VoiceEncoder:
    """Embed one utterance (mono float32 16 kHz) into a unit float32 256-d vector."""

    embedding_model = EMBEDDING_MODEL
    dim = 256

    def __init__(self, weights: str | Path = "", device: str = "cpu", torch_threads: int = 1) -> None:
        import torch
        from resemblyzer import VoiceEncoder as _Resemblyzer

        # The LSTM on a 1-3 s utterance is small: one thread ran it in ~70 ms, two threads (the
        # default on 2 cores, sharing them with the face worker) in 120-380 ms. Process-wide setting;
        # resemblyzer is the only torch model in the perception and memory processes. 0: leave as is.
        if torch_threads > 0:
            torch.set_num_threads(torch_threads)

        path = (
            require_file(weights, "resemblyzer speaker")
            if weights
            else packaged_file("resemblyzer", "pretrained.pt", "resemblyzer speaker")
        )
        self._model = _Resemblyzer(device, verbose=False, weights_fpath=path)
        # torch's first LSTM call sets itself up (~3 s here); do it now, not on the first utterance.
        self._model.embed_utterance(np.random.default_rng(0).normal(0.0, 0.01, 16000).astype(np.float32))

    def encode(self, samples: np.ndarray) -> np.ndarray:
        x = checked_utterance(samples)
        v = np.asarray(self._model.embed_utterance(x), dtype=np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def encode_windows(self, samples: np.ndarray, window_s: float, hop_s: float) -> np.ndarray:
        """Unit embeddings (n, 256) of the windows [k·hop, k·hop + window) that fit in `samples`.

        One mel spectrogram (resemblyzer's, 10 ms frames) and one batched LSTM call, as resemblyzer's
        own partial embeddings (`embed_utterance(return_partials=True)`) but with any window and hop:
        its partials are fixed at 1.6 s, too long for 1-3 s speaker turns.
        """
        import torch
        from resemblyzer.audio import wav_to_mel_spectrogram

        x = checked_utterance(samples)
        win, hop = max(1, round(window_s * 100)), max(1, round(hop_s * 100))
        n = (len(x) - round(window_s * 16000)) // (hop * 160) + 1
        if n < 1:
            return np.zeros((0, 256), np.float32)
        mel = wav_to_mel_spectrogram(x)
        mels = np.stack([mel[k * hop : k * hop + win] for k in range(n)])
        with torch.no_grad():
            return self._model(torch.from_numpy(np.ascontiguousarray(mels))).numpy().astype(np.float32)
