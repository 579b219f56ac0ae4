"""Model files under ~/.cache/m3-agent, checked by sha256 once and then trusted while unchanged.

Hashing a 1 GB model at every start would cost seconds, so a check that passed leaves a stamp (in the
cache, not beside the file: a user's model may sit somewhere read-only) recording the file's path, size,
mtime and hash; the next check with the same size and mtime reads the stamp instead. The speaker
models (m3_perception), the language model (m3_agent) and the text model's ONNX export (m3_memory)
share the cache and this check.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

CHUNK = 8 << 20  # bytes read at a time while hashing


def cache_dir() -> Path:
    """~/.cache/m3-agent (XDG_CACHE_HOME honoured)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "m3-agent"


def models_dir() -> Path:
    return cache_dir() / "models"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return models_dir() / "verified" / f"{path.name}.{key}.json"


def _stat_key(path: Path, sha256: str) -> dict:
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}


def write_stamp(path: Path, sha256: str) -> None:
    """Record that path (as it is now) has this sha256: for a file just hashed while it was written."""
    stamp = _stamp_path(path)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(json.dumps(_stat_key(path, sha256.lower())))
    os.replace(tmp, stamp)


def checked_sha256(path: Path, expected: str) -> str:
    """The file's sha256: `expected` when a stamp says the unchanged file has it, else hashed now (and
    stamped when it matches). The caller compares it with `expected` and says what is wrong."""
    expected = expected.lower()
    try:
        if json.loads(_stamp_path(path).read_text()) == _stat_key(path, expected):
            return expected
    except (OSError, ValueError):
        pass
    actual = sha256_file(path)
    if actual == expected:
        write_stamp(path, actual)
    return actual
