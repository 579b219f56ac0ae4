"""What the control loop needs from memory, as plain data: the loop never sees ROS messages.

The ROS adapter (ros_memory_client.py) implements MemoryClient over the memory node's services;
tests implement it in plain Python. Any failure to reach memory is a MemoryUnavailable, so the
loop can report MEMORY_UNAVAILABLE instead of answering from nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# <face_1>, <voice_2>, <person_3> (tagged) and character_4 (reference style, untagged).
ENTITY_ID_RE = re.compile(r"<((?:face|voice|person|character)_\d+)>|\b(character_\d+)\b")


class MemoryUnavailable(RuntimeError):
    """Memory could not be reached or refused the request (store down, timeout, service missing)."""


class MemoryQueryRejected(ValueError):
    """Memory refused this query (empty, too long, bad argument): the loop reports it to the reasoner."""


@dataclass(frozen=True)
class Memory:
    """One memory node: episodic/semantic text, or a face/voice/person entity."""

    node_id: str
    kind: str
    text: str
    clip_index: int = -1
    score: float = 0.0
    entity_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Clip:
    """One clip window returned by search_clip, with all of its memories."""

    clip_index: int
    score: float
    memories: tuple[Memory, ...] = field(default_factory=tuple)


@runtime_checkable
class MemoryClient(Protocol):
    """Search interface of the memory node (services /m3/memory/search_clip and search_node)."""

    def search_clip(
        self,
        query: str,
        top_k: int = 2,
        threshold: float = 0.5,
        before_clip: int = -1,
        conversation_id: str = "",
        before_stamp_ns: int = 0,
    ) -> list[Clip]:
        """Clips whose best memory scores >= threshold, best first; raises MemoryUnavailable."""
        ...

    def search_node(
        self, query: str, kinds: tuple[str, ...] = (), top_k: int = 20, before_clip: int = -1, before_stamp_ns: int = 0
    ) -> list[Memory]:
        """Memory nodes nearest to the query, best first; raises MemoryUnavailable."""
        ...


def entity_ids_in(text: str) -> list[str]:
    """Entity ids mentioned in text, in order of first appearance, without angle brackets."""
    seen: list[str] = []
    for match in ENTITY_ID_RE.finditer(text):
        entity_id = match.group(1) or match.group(2)
        if entity_id not in seen:
            seen.append(entity_id)
    return seen


def entity_name(client: object, entity_id: str) -> str | None:
    """Name memory knows for an entity, when the client offers a lookup (optional `entity_name` method)."""
    lookup = getattr(client, "entity_name", None)
    if lookup is None:
        return None
    name = lookup(entity_id)
    return name or None
