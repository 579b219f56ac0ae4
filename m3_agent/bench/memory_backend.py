"""The storage back-end of `m3 bench memory` (--backend sqlite | milvus): opening, reopening and sizing
the benchmark's memory, and the memory node's parameters for its service measurement.

With --backend milvus and no --milvus-uri, a milvus-lite server is started on a free localhost port
over a directory beside the memory directory (the set-up the tests use; a real cluster: --milvus-uri).
"""

from __future__ import annotations

import os
import uuid

from m3_memory.memory import Memory
from m3_memory.milvus.server import MilvusLiteServer


def _size(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, name)) for name in files)
    return total


class BenchBackend:
    """Where the benchmark's memory lives; close() stops a server it started."""

    def __init__(self, backend: str, memory_dir: str, milvus_uri: str = "", search_params: str = '{"ef": 128}') -> None:
        self.backend, self.memory_dir, self.server = backend, memory_dir, None
        self.search_params = search_params
        self.prefix = f"bench_{uuid.uuid4().hex[:8]}"
        self.uri = milvus_uri
        if backend == "milvus" and not milvus_uri:
            self.server = MilvusLiteServer(os.path.join(memory_dir, "milvus")).start()
            self.uri = self.server.uri

    def _config(self, dim: int):
        from m3_memory.milvus.backend import MilvusBackend, MilvusConfig

        spool = os.path.join(self.memory_dir, "spool")
        # 20,000-memory bulk transactions: a long deadline (the node's clips are small; 5 s there)
        config = MilvusConfig(
            uri=self.uri,
            collection_prefix=self.prefix,
            spool_dir=spool,
            timeout_s=300,
            search_params=self.search_params,
        )
        return MilvusBackend(config, dim)

    def open(self, embedder=None) -> Memory:
        if self.backend == "sqlite":
            return Memory.open(self.memory_dir, embedder=embedder)
        if embedder is None:
            from m3_memory.search.embedder import TextEmbedder

            embedder = TextEmbedder()
        return Memory(self._config(embedder.dim), embedder)

    def settle(self, memory: Memory) -> None:
        """Before sizing: SQLite's write-ahead log into the database file."""
        if self.backend == "sqlite":
            memory.store.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def release(self, memory: Memory) -> None:
        """Close without saving the text index (the reopen measurement's copy is current)."""
        memory.graph.backend.close()

    def disk_bytes(self) -> int:
        if self.backend == "sqlite":
            return sum(os.path.getsize(os.path.join(self.memory_dir, f)) for f in os.listdir(self.memory_dir)
                       if os.path.isfile(os.path.join(self.memory_dir, f)))  # fmt: skip
        return _size(self.server.data_dir) if self.server is not None else 0  # a remote cluster: unknown

    def node_parameters(self) -> dict[str, object]:
        """The memory node's parameters that open this memory (service measurement)."""
        if self.backend == "sqlite":
            return {"memory_dir": self.memory_dir}
        return {"memory_backend": "milvus", "milvus_uri": self.uri, "milvus_collection_prefix": self.prefix,
                "milvus_spool_dir": os.path.join(self.memory_dir, "spool"),
                "milvus_search_params": self.search_params}  # fmt: skip

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
