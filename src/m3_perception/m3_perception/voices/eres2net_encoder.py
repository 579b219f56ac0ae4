"""ERes2NetV2 speaker embedding (3D-Speaker) from a local ONNX or TorchScript file.

A drop-in for `VoiceEncoder` (`encode(samples) -> unit vector`). 3D-Speaker publishes PyTorch
checkpoints (e.g. modelscope `iic/speech_eres2netv2_sv_zh-cn_16k-common`,
`pretrained_eres2netv2.ckpt`), which are state dicts: building the network needs 3D-Speaker's
`speakerlab` package, which is not a dependency here. So the model is loaded from an export:

- ONNX, as 3D-Speaker's `speakerlab/bin/export_speaker_embedding_onnx.py` writes it: input
  'feature' [batch, frames, 80], output 'embedding' [batch, 192]; run with onnxruntime (CUDA
  provider when available, else CPU);
- TorchScript (`torch.jit.trace(model, torch.randn(1, 200, 80)).save(...)`), same input/output.

A raw state dict is refused with a message saying how to export it. The input is what 3D-Speaker
feeds its models (`FBank(80, 16000, mean_nor=True)`): 80-bin Kaldi fbank of the 16 kHz float
samples, mean-normalised over time (`fbank.py`). The output is L2-normalised; speakers are
compared by cosine (`voice_match_cosine`, suggested 0.6 for this back-end).

Real ERes2NetV2 weights were not available where this was written (no network); the tests use
stand-in ONNX and TorchScript models with the real input/output names and shapes, so they prove
the loading, the features and the interface, not the speaker discrimination.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from m3_perception.faces.insightface_encoder import choose_providers
from m3_perception.model_files import ModelFileMissing, require_file
from m3_perception.voices.fbank import mean_normalised_fbank
from m3_perception.voices.resemblyzer_encoder import MIN_SAMPLES, checked_utterance

EMBEDDING_MODEL = "eres2netv2"
NUM_MEL_BINS = 80
EXPORT_HINT = (
    "export it once where 3D-Speaker is installed, to ONNX with "
    "`python speakerlab/bin/export_speaker_embedding_onnx.py --experiment_path EXP "
    "--model_id iic/speech_eres2netv2_sv_zh-cn_16k-common --target_onnx_file eres2netv2.onnx` "
    "or to TorchScript with `torch.jit.trace(model.eval(), torch.randn(1, 200, 80)).save('eres2netv2.pt')`, "
    "and set speaker_model to that file"
)


class SpeakerModelError(RuntimeError):
    """The speaker model file is there but cannot be used as is; the message says what to do."""


def model_format(path: Path) -> str:
    """'torchscript', 'state_dict' (any other torch.save file) or 'onnx' (everything else, checked on load).

    TorchScript and torch.save both write zip archives; only TorchScript's holds compiled `code/`.
    Old (pre-1.6) torch.save files are bare pickles, which start with the protocol byte 0x80.
    """
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        return "torchscript" if any("/code/" in n or n.startswith("code/") for n in names) else "state_dict"
    with open(path, "rb") as f:
        head = f.read(2)
    return "state_dict" if head[:1] == b"\x80" else "onnx"


class Eres2NetEncoder:
    """Embed one utterance (mono float32 16 kHz) into a unit float32 vector (192-d for ERes2NetV2)."""

    embedding_model = EMBEDDING_MODEL

    def __init__(self, model_path: str | Path, threads: int = 1, device: str = "auto") -> None:
        """`threads`: CPU threads for one embedding (1, as resemblyzer: the face worker shares the cores;
        for TorchScript it is torch's process-wide setting; 0 leaves the libraries' default).
        `device`: 'auto' (CUDA when available), 'cpu' or 'cuda'."""
        if not str(model_path):
            raise ModelFileMissing(
                "speaker_backend 'eres2netv2' needs speaker_model: an ERes2NetV2 ONNX or TorchScript file"
            )
        path = require_file(model_path, "ERes2NetV2 speaker")
        self.path = path
        self.format = model_format(path)
        if self.format == "state_dict":
            raise SpeakerModelError(
                f"{path} is a PyTorch checkpoint (state dict); building ERes2NetV2 from it needs 3D-Speaker's "
                f"speakerlab package: {EXPORT_HINT}"
            )
        if self.format == "torchscript":
            self._load_torchscript(threads, device)
        else:
            self._load_onnx(threads, device)
        # A first call sets the runtime up (and checks the output); not on the first utterance.
        self.dim = int(self._run(np.zeros((MIN_SAMPLES // 160, NUM_MEL_BINS), np.float32)).shape[-1])

    def _load_torchscript(self, threads: int, device: str) -> None:
        import torch

        if threads > 0:
            torch.set_num_threads(threads)
        cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
        self.device = "cuda" if cuda else "cpu"
        try:
            self._model = torch.jit.load(str(self.path), map_location=self.device).eval()
        except Exception as e:  # torch raises RuntimeError subclasses for unreadable archives
            raise SpeakerModelError(f"torch cannot load the TorchScript file {self.path}: {e}") from e

    def _load_onnx(self, threads: int, device: str) -> None:
        import onnxruntime as ort

        available = ort.get_available_providers()
        providers = choose_providers(available) if device != "cpu" else ["CPUExecutionProvider"]
        if device == "cuda" and "CUDAExecutionProvider" not in available:
            raise SpeakerModelError("speaker device 'cuda' asked for, but onnxruntime has no CUDAExecutionProvider")
        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
        try:
            self._session = ort.InferenceSession(str(self.path), opts, providers=providers)
        except Exception as e:  # onnxruntime raises its own exception types
            raise SpeakerModelError(
                f"{self.path} is neither an ONNX model, a TorchScript file nor a PyTorch checkpoint ({e})"
            ) from e
        self.device = "cuda" if "CUDAExecutionProvider" in self._session.get_providers() else "cpu"
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        shape = inputs[0].shape
        if len(inputs) != 1 or len(shape) != 3 or (isinstance(shape[2], int) and shape[2] != NUM_MEL_BINS):
            got = [(i.name, i.shape) for i in inputs]
            raise SpeakerModelError(f"{self.path}: expected one input [batch, frames, {NUM_MEL_BINS}], got {got}")
        if len(outputs) != 1 or len(outputs[0].shape) != 2:
            got = [(o.name, o.shape) for o in outputs]
            raise SpeakerModelError(f"{self.path}: expected one output [batch, dim], got {got}")
        self._input = inputs[0].name

    def _run(self, feat: np.ndarray) -> np.ndarray:
        """Raw embedding of one [frames, 80] feature matrix."""
        x = np.ascontiguousarray(feat[None], dtype=np.float32)
        if self.format == "torchscript":
            import torch

            with torch.inference_mode():
                out = self._model(torch.from_numpy(x).to(self.device))
            if isinstance(out, (tuple, list)):
                out = out[-1]  # some exports return (features, embedding)
            v = out.detach().float().cpu().numpy()
        else:
            v = self._session.run(None, {self._input: x})[0]
        v = np.asarray(v, np.float32)
        if v.ndim != 2 or v.shape[0] != 1:
            raise SpeakerModelError(f"{self.path}: expected an output of shape [1, dim], got {v.shape}")
        return v[0]

    def encode(self, samples: np.ndarray) -> np.ndarray:
        x = checked_utterance(samples)
        v = self._run(mean_normalised_fbank(x))
        return v / max(float(np.linalg.norm(v)), 1e-12)
