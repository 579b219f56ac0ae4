"""Shared fixtures: one real MiniLM embedder per test session (loading it takes seconds)."""

from __future__ import annotations

import pytest

from m3_memory.embedder import TextEmbedder
from m3_memory.graph import GraphConfig
from m3_memory.memory import Memory


@pytest.fixture(scope="session")
def embedder() -> TextEmbedder:
    return TextEmbedder()


@pytest.fixture
def memory(tmp_path, embedder):
    mem = Memory.open(str(tmp_path / "mem"), embedder, GraphConfig())
    yield mem
    mem.close()
