"""The text embedder's two runtimes: the ONNX export gives sentence-transformers' vectors, is made once
and cached, a damaged cache file is replaced, and what cannot work says so."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import shutil
import sys
import time

import numpy as np
import pytest

from m3_memory.errors import ModelMissingError
from m3_memory.search import onnx_text_encoder
from m3_memory.search.embedder import TextEmbedder

TEXTS = [
    "<face_3> hands the red cup to <voice_12> in the kitchen.",
    "Where did Anna put the keys?",
    "",
    "Ça coûte 12,50 € — très cher!",
    "word " * 400,  # past max_seq_length: truncated alike by both runtimes
    *[f"<person_{i}> said the meeting moved to room {i}." for i in range(70)],  # more than one batch
]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx_cache")


@pytest.fixture(scope="module")
def onnx_embedder(onnx_cache) -> TextEmbedder:
    return TextEmbedder(runtime="onnxruntime", onnx_cache_dir=str(onnx_cache))


def test_onnx_vectors_match_sentence_transformers(onnx_embedder):
    torch_embedder = TextEmbedder(runtime="torch")
    got = onnx_embedder.embed_batch(TEXTS)
    want = torch_embedder.embed_batch(TEXTS)
    assert got.shape == want.shape == (len(TEXTS), 384)
    assert float(np.abs(got - want).max()) < 1e-5
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # The query path (cache + single texts) gives the same rows as the batch path.
    np.testing.assert_allclose(onnx_embedder.embed(TEXTS[:2]), got[:2], atol=1e-6)


def test_export_is_made_once_and_reused(onnx_embedder, onnx_cache, monkeypatch):
    assert len(list(onnx_cache.glob("text-*.onnx"))) == 1
    assert not list(onnx_cache.glob("*.part"))  # the export's temporary file is gone
    (cached,) = onnx_cache.glob("text-*.onnx")
    assert cached.stat().st_mode & 0o777 == 0o644  # other users of a shared cache can read it

    def no_export(*args):
        raise AssertionError("exported again although the cache holds the model")

    monkeypatch.setattr(onnx_text_encoder, "export_onnx", no_export)
    again = TextEmbedder(runtime="onnxruntime", onnx_cache_dir=str(onnx_cache))
    np.testing.assert_allclose(again.embed_batch(TEXTS[:3]), onnx_embedder.embed_batch(TEXTS[:3]), atol=1e-6)


def test_damaged_cache_file_is_exported_again(onnx_embedder, onnx_cache, tmp_path, caplog):
    (cached,) = onnx_cache.glob("text-*.onnx")
    damaged = tmp_path / "cache"
    damaged.mkdir()
    (damaged / cached.name).write_bytes(cached.read_bytes()[: cached.stat().st_size // 3])  # truncated
    with caplog.at_level(logging.WARNING, logger=onnx_text_encoder.__name__):
        embedder = TextEmbedder(runtime="onnxruntime", onnx_cache_dir=str(damaged))
    assert "does not load" in caplog.text
    assert (damaged / cached.name).stat().st_size == cached.stat().st_size
    np.testing.assert_allclose(embedder.embed_batch(TEXTS[:3]), onnx_embedder.embed_batch(TEXTS[:3]), atol=1e-6)


def test_unwritable_cache_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(ModelMissingError, match="text_onnx_cache_dir"):
        TextEmbedder(runtime="onnxruntime", onnx_cache_dir=str(blocker / "models"))


def test_missing_onnx_package_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(ModelMissingError, match="package onnx"):
        TextEmbedder(runtime="onnxruntime", onnx_cache_dir=str(tmp_path / "models"))


def test_unknown_runtime_is_refused():
    with pytest.raises(ValueError, match="runtime must be one of"):
        TextEmbedder(runtime="tensorflow")


def test_concurrent_starts_export_once(onnx_cache, tmp_path, monkeypatch):
    """Memory nodes starting together on a fresh machine: one exports, the others wait and load its file."""
    (cached,) = onnx_cache.glob("text-*.onnx")
    exports = []

    def slow_export(model_path, onnx_path):  # the real export's effect (an atomic move), slowly
        exports.append(onnx_path)
        time.sleep(1.0)
        shutil.copyfile(cached, onnx_path.with_suffix(".part"))
        os.replace(onnx_path.with_suffix(".part"), onnx_path)

    monkeypatch.setattr(onnx_text_encoder, "export_onnx", slow_export)
    fresh = str(tmp_path / "models")
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        embedders = list(pool.map(lambda _: TextEmbedder(onnx_cache_dir=fresh), range(3)))
    assert len(exports) == 1
    vectors = [e.embed_batch(TEXTS[:2]) for e in embedders]
    np.testing.assert_allclose(vectors[0], vectors[2], atol=1e-7)
