"""Opening a Memory on either back-end for the tests parametrised over both (BACKENDS in a test module)."""

from __future__ import annotations

import itertools
import os

from m3_memory.graph.memory_graph import GraphConfig
from m3_memory.memory import Memory
from m3_memory.milvus.backend import MilvusBackend, MilvusConfig
from m3_memory.milvus.server import MilvusLiteServer
from m3_memory.search.api import SearchConfig

BOTH = ("sqlite", "milvus")
_prefixes = itertools.count()


def fresh_prefix() -> str:
    """A collection prefix no other test of this session uses (one server serves them all)."""
    return f"t{os.getpid()}_{next(_prefixes)}"


def open_memory(
    backend: str,
    path: str,
    embedder,
    server: MilvusLiteServer | None,
    graph_config: GraphConfig | None = None,
    search_config: SearchConfig | None = None,
    prefix: str | None = None,
    robot_id: str = "robot",
) -> Memory:
    """A Memory in directory path (sqlite) or in fresh collections of the session's server (milvus)."""
    if backend == "sqlite":
        return Memory.open(path, embedder, graph_config or GraphConfig(), search_config)
    config = MilvusConfig(uri=server.uri, collection_prefix=prefix or fresh_prefix(), robot_id=robot_id)
    return Memory(MilvusBackend(config, embedder.dim), embedder, graph_config or GraphConfig(), search_config)
