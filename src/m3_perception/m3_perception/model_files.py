"""Locate model files shipped inside installed packages, without importing those packages.

face_recognition_models' __init__ imports pkg_resources (gone with setuptools >= 81), so its
files are found through the import system's spec only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


class ModelFileMissing(FileNotFoundError):
    """A model file the perception node needs is not on disk; the message names it."""


def package_dir(package: str) -> Path:
    """Directory of an installed package, found without executing its __init__."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileMissing(f"package {package!r} is not installed; it ships the model files needed here")
    return Path(next(iter(spec.submodule_search_locations)))


def require_file(path: str | Path, what: str) -> Path:
    """Return `path` if it is a file, else raise ModelFileMissing naming it."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ModelFileMissing(f"{what} model file not found: {p}")
    return p


def packaged_file(package: str, relative: str, what: str) -> Path:
    """A model file inside an installed package (e.g. face_recognition_models/models/...)."""
    return require_file(package_dir(package) / relative, what)
