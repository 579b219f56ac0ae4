"""A text index kept on disk beside what it indexes, so a large memory opens without rebuilding it.

The index is saved with a description of what it holds (`meta`: counts, dimension, and for Milvus a
digest of the memories' texts); it is used only when the memory opened describes itself the same
way. The description is written last, so a save torn by a crash reads as a mismatch: rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable

from m3_memory.graph.records import TextNode
from m3_memory.store.ann_index import EXACT_MAX, CosineIndex


def texts_digest(nodes: Iterable[TextNode]) -> str:
    """What a robot's text memories are (in seq order): equal digests, equal memories."""
    digest = hashlib.blake2b(digest_size=16)
    for node in nodes:
        digest.update(f"{node.seq}\x1f{node.node_id}\x1f{node.text}\x1e".encode())
    return digest.hexdigest()


def matching(base: str, meta: dict) -> str | None:
    """Path of the index saved at base when its description equals meta (and it is big enough to be
    worth loading), else None (rebuild)."""
    try:
        with open(base + ".json", encoding="utf-8") as handle:
            saved = json.load(handle)
    except (OSError, ValueError):
        return None
    path = base + ".hnsw"
    return path if saved == meta and meta.get("count", 0) > EXACT_MAX and os.path.isfile(path) else None


def save(base: str, index: CosineIndex, meta: dict) -> bool:
    """Save index at base with its description; False when too small to be worth keeping."""
    if meta.get("count", 0) <= EXACT_MAX:
        return False
    path, meta_path = base + ".hnsw", base + ".json"
    os.makedirs(os.path.dirname(path), exist_ok=True)  # hnswlib writes nothing, silently, into no directory
    for stale in (meta_path, path):
        if os.path.exists(stale):
            os.remove(stale)
    index.save(path + ".tmp")
    os.replace(path + ".tmp", path)  # FileNotFoundError if hnswlib could not write it
    with open(meta_path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(meta_path + ".tmp", meta_path)
    return True
