"""Streaming voice activity detection with silero-vad's ONNX model (onnxruntime, no torch)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from m3_perception.model_files import packaged_file, require_file

FRAME = 512  # samples per VAD step at 16 kHz (32 ms), fixed by the model
_CONTEXT = 64  # samples of the previous step the model expects in front of each step


class SileroVad:
    """Speech probability per 32 ms frame; keeps the recurrent state between calls."""

    def __init__(self, model_path: str | Path = "") -> None:
        import onnxruntime as ort

        path = (
            require_file(model_path, "silero VAD")
            if model_path
            else packaged_file("silero_vad", "data/silero_vad.onnx", "silero VAD")
        )
        opts = ort.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        self._sess = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), np.float32)
        self._context = np.zeros((1, _CONTEXT), np.float32)

    def frame_prob(self, frame: np.ndarray) -> float:
        """Speech probability of exactly FRAME samples (float32, 16 kHz)."""
        if frame.shape != (FRAME,):
            raise ValueError(f"VAD frame must have {FRAME} samples, got {frame.shape}")
        x = np.concatenate([self._context, frame[None].astype(np.float32)], axis=1)
        out, self._state = self._sess.run(
            None, {"input": x, "state": self._state, "sr": np.array(16000, dtype=np.int64)}
        )
        self._context = x[:, -_CONTEXT:]
        return float(out[0, 0])
