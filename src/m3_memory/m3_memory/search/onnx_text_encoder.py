"""The sentence-transformers text model on onnxruntime: the same vectors as torch (within 1e-5), about
twice as fast per query on CPU, and no torch in the process once the graph exists.

The ONNX graph (transformer + mean pooling + L2 normalisation) is exported from the local weights with
torch.onnx once per model, verified against sentence-transformers' own output, and cached under
`cache_dir` keyed by the weights' hash. Export needs torch, sentence-transformers and the `onnx`
package; running the cached graph needs only onnxruntime and tokenizers.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from m3_memory.errors import ModelMissingError
from m3_memory.search.text_model import weights_file
from m3_runtime.verified_files import models_dir

EXPORT_VERSION = 1  # bump when the exported graph's shape or inputs change: old cache files are ignored
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
MAX_EXPORT_ERROR = 1e-5  # largest |ONNX - sentence-transformers| accepted on the probe sentences
PROBES = [
    "<face_3> hands the red cup to <voice_12> in the kitchen.",
    "Where are the keys?",
    "a",
    " ".join(["The robot remembers everything it has seen and heard today."] * 40),  # longer than max_seq_length
]

log = logging.getLogger(__name__)


def default_cache_dir() -> str:
    return str(models_dir())


def _model_key(model_path: str) -> str:
    """A hash of the weights and the files that shape the output (tokenizer, pooling, sequence length)."""
    digest = hashlib.sha256(f"export-v{EXPORT_VERSION}".encode())
    shaping = ("config.json", "tokenizer.json", "sentence_bert_config.json", "modules.json", "1_Pooling/config.json")
    files = [Path(weights_file(model_path))] + [Path(model_path) / name for name in shaping]
    for path in files:
        if path.is_file():
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:20]


def _max_seq_length(model_path: str) -> int:
    config = Path(model_path) / "sentence_bert_config.json"
    if config.is_file():
        return int(json.loads(config.read_text()).get("max_seq_length", 256))
    return 256


class OnnxTextEncoder:
    """Unit sentence vectors from the cached ONNX graph (exported on first use)."""

    def __init__(self, model_path: str, cache_dir: str | None = None, threads: int = 0) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as error:
            raise ModelMissingError(
                f"text embedder runtime onnxruntime: package {error.name} is not installed "
                "(see tools/requirements.txt), or use text_runtime: torch"
            ) from error
        tokenizer_file = Path(model_path) / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise ModelMissingError(f"text embedder: tokenizer not found: {tokenizer_file}")
        self.model_path = model_path
        self.onnx_path = Path(cache_dir or default_cache_dir()) / f"text-{_model_key(model_path)}.onnx"
        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = 1
        # Threads sleep when a run ends instead of spinning: a spinning pool holds the cores the service's
        # reply (serialisation, DDS) and the other nodes need next. Over the memory services a fresh search
        # takes ~4 ms less on 2 cores (m3_control README); in one process it costs ~2 ms, bulk ingest is unchanged.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads

        def new_session():
            return onnxruntime.InferenceSession(str(self.onnx_path), options, providers=["CPUExecutionProvider"])

        def cached_session():
            """The cached export's session; None when it is missing or does not load (it is derived
            data: then it is made again)."""
            try:
                return new_session()
            except Exception as error:  # noqa: BLE001 - onnxruntime raises its own unexported types
                if self.onnx_path.is_file():
                    log.warning("cached ONNX text model %s does not load (%s)", self.onnx_path, error)
                return None

        self._session = cached_session()
        if self._session is None:
            with _export_lock(self.onnx_path.parent):
                self._session = cached_session()  # another process may have exported it while this one waited
                if self._session is None:
                    export_onnx(model_path, self.onnx_path)
                    self._session = new_session()
        self.dim = int(self._session.get_outputs()[0].shape[-1])
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(_max_seq_length(model_path))
        self._tokenizer.enable_padding()  # to the batch's longest (tokenizer.json pads to a fixed 128)

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Similar lengths together, as sentence-transformers does, so a batch pads little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            encodings = self._tokenizer.encode_batch([texts[i] for i in chunk])
            feed = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
            out[chunk] = self._session.run(None, feed)[0]
        return out


def _unwritable(directory: Path, error: OSError) -> ModelMissingError:
    return ModelMissingError(
        f"cannot write the text model's ONNX export in {directory} ({error}): "
        "set text_onnx_cache_dir to a writable directory, or use text_runtime: torch"
    )


@contextmanager
def _export_lock(directory: Path) -> Iterator[None]:
    """One exporting process per cache directory; the others wait and then load its file."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = open(directory / ".export.lock", "a")  # held for the with-block below
    except OSError as error:
        raise _unwritable(directory, error) from error
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def export_onnx(model_path: str, onnx_path: Path) -> None:
    """Export model_path's transformer with mean pooling and normalisation, check it against
    sentence-transformers on PROBES, and move it into place atomically."""
    try:
        import onnx  # noqa: F401 - torch.onnx.export needs it; fail here with its name
        import onnxruntime
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ModelMissingError(
            f"exporting the text model to ONNX needs package {error.name} (see tools/requirements.txt), "
            "or use text_runtime: torch"
        ) from error
    log.info("exporting the text model %s to ONNX (once): %s", model_path, onnx_path)
    reference = SentenceTransformer(model_path, device="cpu")
    modules = [type(m).__name__ for m in reference]
    if modules != ["Transformer", "Pooling", "Normalize"]:  # the pooling mode is checked by the probes
        raise ModelMissingError(
            f"text model {model_path} is {modules}; the ONNX export supports Transformer + mean Pooling + "
            "Normalize: use text_runtime: torch"
        )

    class Pooled(torch.nn.Module):
        def __init__(self, transformer: torch.nn.Module) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=1)

    model = Pooled(reference[0].auto_model).eval()
    sample = reference.tokenizer(PROBES[:2], padding=True, return_tensors="pt")
    try:
        handle, temporary = tempfile.mkstemp(prefix=onnx_path.name, suffix=".part", dir=onnx_path.parent)
    except OSError as error:
        raise _unwritable(onnx_path.parent, error) from error
    os.close(handle)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on branches that are constant for BERT
            torch.onnx.export(
                model,
                tuple(sample[name] for name in INPUTS),
                temporary,
                input_names=list(INPUTS),
                output_names=["embedding"],
                dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in INPUTS}, "embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        session = onnxruntime.InferenceSession(temporary, providers=["CPUExecutionProvider"])
        encoded = reference.tokenizer(
            PROBES, padding=True, truncation=True, max_length=reference.max_seq_length, return_tensors="np"
        )
        got = session.run(None, {name: encoded[name].astype(np.int64) for name in INPUTS})[0]
        want = reference.encode(PROBES, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        error = float(np.abs(got - want).max())
        if error > MAX_EXPORT_ERROR:
            raise RuntimeError(
                f"the ONNX export of {model_path} differs from sentence-transformers by {error:.2e} "
                f"(> {MAX_EXPORT_ERROR:.0e}): use text_runtime: torch"
            )
        os.chmod(temporary, 0o644)  # mkstemp makes it owner-only; a shared cache must be readable
        os.replace(temporary, onnx_path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
