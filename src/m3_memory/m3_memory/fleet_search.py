"""Search the memories of a whole fleet, or of one robot, in the Milvus they share.

The node's search services answer from this robot's own memory (its graph in RAM); this asks
Milvus itself, over every robot's text memories: `search_fleet(memory, "where are the keys?")`.
"""

from __future__ import annotations

from m3_memory.memory import Memory


def search_fleet(memory: Memory, query: str, top_k: int = 10, robot_id: str = "") -> list[dict]:
    """Closest memories of every robot (robot_id "" ) or of one; each a dict with robot_id and score."""
    search_text = getattr(memory.graph.backend, "search_text", None)
    if search_text is None:
        raise ValueError("a fleet search needs memory_backend milvus (this memory is a local SQLite store)")
    if not query.strip():
        raise ValueError("empty query")
    return search_text(memory.embedder.embed([query])[0], top_k, robot_id)
