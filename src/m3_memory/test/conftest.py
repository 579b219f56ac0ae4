"""Shared fixtures: one real MiniLM embedder per test session (loading it takes seconds), and one
Milvus Lite server per session for the tests parametrised over both back-ends."""

from __future__ import annotations

import pytest
from memory_backends import open_memory

from m3_memory.milvus.server import MilvusLiteServer
from m3_memory.search.embedder import TextEmbedder


def pytest_generate_tests(metafunc) -> None:
    """A module that lists back-ends in BACKENDS runs its memory tests on each (test ids [sqlite], [milvus])."""
    if "backend_name" in metafunc.fixturenames and hasattr(metafunc.module, "BACKENDS"):
        metafunc.parametrize("backend_name", metafunc.module.BACKENDS)


@pytest.fixture
def backend_name() -> str:
    """The SQLite store, in modules without BACKENDS (their test ids stay as they were)."""
    return "sqlite"


@pytest.fixture(scope="session")
def embedder() -> TextEmbedder:
    return TextEmbedder()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """A `milvus-lite server` process on a free localhost port, for the whole session."""
    server = MilvusLiteServer(str(tmp_path_factory.mktemp("milvus") / "data")).start()
    yield server
    server.stop()


@pytest.fixture
def memory(request, tmp_path, embedder, backend_name):
    server = request.getfixturevalue("milvus_server") if backend_name == "milvus" else None
    mem = open_memory(backend_name, str(tmp_path / "mem"), embedder, server)
    yield mem
    mem.close()
