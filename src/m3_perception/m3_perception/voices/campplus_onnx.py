"""CAM++ on onnxruntime: the torch network exported once to ONNX, cached beside the weights.

Why: the speaker-turn search embeds ten 1-s windows per second of speech, and it was the largest cost
of the voice worker after speech recognition. onnxruntime runs the same network about 1.4x faster than
torch eager on one thread here (51 windows: 836 vs 1205 ms), with the same output (cosine 0.9999999).

The export is keyed by the weights' sha256, written through a temporary file and renamed (a kill
leaves no half file under the final name), and accepted only when it reproduces the torch network's
embeddings on a random batch; otherwise CamPlusExportFailed says so and nothing is cached.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from m3_runtime.verified_files import models_dir, sha256_file

EXPORT_DIR = "campplus_onnx"
OPSET = 17
MIN_COSINE = 0.9999  # export accepted when every test embedding agrees with torch's at least this much


class CamPlusExportFailed(RuntimeError):
    """The ONNX export of CAM++ could not be made or does not reproduce the torch network."""


def onnx_path(weights: Path) -> Path:
    """Where the export of these weights lives (one file per weights content)."""
    return models_dir() / EXPORT_DIR / f"{weights.stem}.{sha256_file(weights)[:16]}.onnx"


def exported(weights: Path, load_torch: Callable[[], Any]) -> Path:
    """The ONNX file of the network in `weights`, exported and checked on first use (only then is the
    torch network loaded, by `load_torch`)."""
    path = onnx_path(weights)
    if path.is_file():
        return path
    import torch

    torch_model = load_torch()

    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    handle.close()
    tmp = Path(handle.name)
    try:
        batch = torch.from_numpy(np.random.default_rng(0).normal(0.0, 1.0, (3, 100, 80)).astype(np.float32))
        try:
            torch.onnx.export(
                torch_model,
                (batch,),
                str(tmp),
                input_names=["feats"],
                output_names=["embedding"],
                dynamic_axes={"feats": {0: "batch", 1: "frames"}, "embedding": {0: "batch"}},
                opset_version=OPSET,
                dynamo=False,
            )
        except Exception as e:  # any export failure is one clear error
            raise CamPlusExportFailed(f"exporting CAM++ ({weights}) to ONNX failed: {e}") from e
        with torch.inference_mode():
            want = torch_model(batch).numpy()
        got = session(tmp, threads=1).run(None, {"feats": batch.numpy()})[0]
        cosine = float(np.min(np.sum(_unit(got) * _unit(want), axis=1)))
        if not cosine >= MIN_COSINE:
            raise CamPlusExportFailed(f"the ONNX export of CAM++ ({weights}) differs from torch: cosine {cosine:.6f}")
        with open(tmp, "rb+") as written:
            os.fsync(written.fileno())
        tmp.chmod(0o644)  # as the other model files (the temporary file was private)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load_session(weights: Path, load_torch: Callable[[], Any], threads: int) -> Any:
    """A session on the export of these weights; a cached export onnxruntime cannot load (truncated,
    corrupt) is made again once, from the weights."""
    path = exported(weights, load_torch)
    try:
        return session(path, threads)
    except Exception:  # noqa: BLE001 - onnxruntime's errors derive from Exception only: rebuild the file
        path.unlink(missing_ok=True)
    try:
        return session(exported(weights, load_torch), threads)
    except CamPlusExportFailed:
        raise
    except Exception as e:  # as above: a fresh export that does not load is one clear error
        raise CamPlusExportFailed(f"onnxruntime cannot load the fresh ONNX export of CAM++ ({weights}): {e}") from e


def session(path: Path, threads: int) -> Any:
    """An onnxruntime CPU session on `threads` intra-op threads (0: onnxruntime's default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(0, threads)
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
