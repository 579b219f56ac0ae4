"""One state file: JSON metadata and numpy arrays in an .npz, written atomically, read without pickle.

The metadata is stored as the UTF-8 bytes of its JSON under the key `__meta__`. Writing goes to a
temporary file in the same directory, is fsynced, renamed over the target and the directory fsynced,
so a kill -9 leaves either the old file or the new one, never a torn one. Reading uses
allow_pickle=False (an .npz can hold pickled objects; these never do) and turns every way a file can
be damaged into StateError.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

META = "__meta__"


class StateError(ValueError):
    """A saved state that cannot be restored (corrupt, foreign, or of another version)."""


def write_state(path: str | Path, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write `meta` and `arrays` to `path` atomically (temporary file, fsync, rename, fsync dir)."""
    path = Path(path)
    if META in arrays:
        raise ValueError(f"{META} is reserved for the metadata")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **{META: np.frombuffer(json.dumps(meta).encode(), np.uint8)}, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_state(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, arrays) of a file written by write_state; StateError when it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as error:
        raise StateError(f"{path}: unreadable state file ({type(error).__name__}: {error})") from error
    raw = arrays.pop(META, None)
    if raw is None or raw.dtype != np.uint8:
        raise StateError(f"{path}: no metadata")
    try:
        meta = json.loads(raw.tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise StateError(f"{path}: metadata is not JSON ({error})") from error
    if not isinstance(meta, dict):
        raise StateError(f"{path}: metadata is not a JSON object")
    return meta, arrays
