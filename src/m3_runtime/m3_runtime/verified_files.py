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
import tempfile
from pathlib import Path
from typing import BinaryIO

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


def file_problem(path: Path, size: int, sha256: str) -> str | None:
    """What is wrong with `path` against its pinned size and sha256 (None: nothing). The caller
    wraps the text in its own error, naming where the file comes from and how to fetch it."""
    if not path.is_file():
        return f"{path} is missing"
    actual_size = path.stat().st_size
    if actual_size != size:
        return f"{path} has {actual_size} bytes, expected {size}"
    actual = checked_sha256(path, sha256)
    if actual != sha256.lower():
        return f"{path} has sha256 {actual}, expected {sha256}"
    return None


def install_verified(source: BinaryIO, dest: Path, size: int, sha256: str) -> str | None:
    """Copy `source` to `dest` through a tmp file + fsync + rename, so a kill never leaves a half file
    under the final name, and only when size and sha256 match (hashed while writing, then stamped:
    no second pass). None when installed, else what was wrong (nothing is left behind)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    handle = tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp", delete=False)
    tmp = Path(handle.name)
    try:
        with handle:
            while block := source.read(CHUNK):
                digest.update(block)
                handle.write(block)
            handle.flush()
            os.fsync(handle.fileno())
        written = tmp.stat().st_size
        if written != size or digest.hexdigest() != sha256.lower():
            tmp.unlink()
            return f"extracted {written} bytes, sha256 {digest.hexdigest()}; expected {size}, {sha256}"
        tmp.chmod(0o644)  # a model is for every user of the machine
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    write_stamp(dest, sha256)
    return None
