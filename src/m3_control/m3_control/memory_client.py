"""What the control loop needs from memory, as plain data: the loop never sees ROS messages.

Two adapters implement MemoryClient: ros_memory_client.py over the memory node's services, and
direct_memory_client.py over an m3_memory `Memory` object in this process (the one-process
bring-up). Both convert results with `memory_of` / `clip_of` and map error codes with
`memory_error` below, so the loop sees the same data and the same errors whichever way memory is
reached. Any failure to reach memory is a MemoryUnavailable, so the loop can report
MEMORY_UNAVAILABLE instead of answering from nothing; a query memory refuses is a MemoryQueryRejected.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from m3_memory.graph.records import Place

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
    robot_id: str = ""  # the robot that stored it ("" for entities and where memory does not say)
    end_ns: int = 0  # end of its evidence (stream clock); for an entity, when it was last observed
    place: Place | None = None  # where the robot was when it happened; None without a pose, and for entities
    superseded_by: str = ""  # the memory that replaced what this one states (as known at the as-of time); "" = none
    entity_names: tuple[str, ...] | None = None  # each entity_ids entry's learnt name ("" none); None: not carried


@dataclass(frozen=True)
class Clip:
    """One clip window returned by search_clip, with all of its memories."""

    clip_index: int
    score: float
    memories: tuple[Memory, ...] = field(default_factory=tuple)
    robot_id: str = ""  # the robot that stored the clip (clip_index counts that robot's clips)


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
        robot_id: str = "",
        after_ns: int = 0,
    ) -> list[Clip]:
        """Clips whose best memory scores >= threshold, best first; raises MemoryUnavailable.
        robot_id: whose memories ("" = every robot sharing the memory: a fleet's); after_ns with
        before_stamp_ns: a time window (memories that ended at or after after_ns; 0 = none)."""
        ...

    def search_node(
        self,
        query: str,
        kinds: tuple[str, ...] = (),
        top_k: int = 20,
        before_clip: int = -1,
        before_stamp_ns: int = 0,
        robot_id: str = "",
        after_ns: int = 0,
    ) -> list[Memory]:
        """Memory nodes nearest to the query, best first (after_ns: as for search_clip); raises MemoryUnavailable."""
        ...


def memory_of(item, score: float | None = None, names: Mapping[str, str] | None = None) -> Memory:
    """A Memory from anything with MemoryItem's fields: a MemoryItem message, or m3_memory's SearchHit /
    TextNode (a TextNode has no score or names of its own: pass the clip's node score and names)."""
    end_ns = getattr(item, "end_ns", None)
    if end_ns is None:  # a message: builtin_interfaces/Time
        end_ns = int(item.end.sec) * 1_000_000_000 + int(item.end.nanosec)
    ids = tuple(item.entity_ids)
    carried = [names.get(i, "") for i in ids] if names is not None else getattr(item, "entity_names", None)
    return Memory(
        node_id=item.node_id,
        kind=item.kind,
        text=item.text,
        clip_index=int(item.clip_index),
        score=float(item.score if score is None else score),
        entity_ids=ids,
        robot_id=str(getattr(item, "robot_id", "")),
        end_ns=int(end_ns),
        place=place_of(getattr(item, "place", None)),
        superseded_by=str(getattr(item, "superseded_by", "")),
        entity_names=tuple(carried) if carried is not None and len(carried) == len(ids) else None,
    )


def shown_place(memory: Memory) -> str:
    """Where the robot was when the memory happened, as reasoners read it ("robot in the kitchen"); "" when
    memory has no region for it. Said apart from the text: a room named here is where it was said or seen,
    not where a thing is."""
    return f"robot in the {memory.place.region}" if memory.place is not None and memory.place.region else ""


def shown_text(memory: Memory) -> str:
    """The memory as reasoners read it: a statement a newer memory replaced says so (both sides are then in
    evidence), so every reasoner, and the answer checks, see the same words."""
    if memory.superseded_by:
        return f"{memory.text} (no longer true: replaced by {memory.superseded_by})"
    return memory.text


def place_of(place) -> Place | None:
    """A Place from a Place message (None when `known` is false) or from m3_memory's records (a Place or None)."""
    if place is not None and hasattr(place, "known"):
        return Place(place.frame_id, place.x, place.y, place.yaw, place.region) if place.known else None
    return place


def clip_of(
    clip_index: int,
    score: float,
    items: Iterable,
    node_scores: Mapping[str, float] | None = None,
    robot_id: str = "",
    names: Mapping[str, str] | None = None,
) -> Clip:
    """A Clip from its memories in order (episodic, then semantic). node_scores: memory id -> score, for
    items without a score of their own (m3_memory's ClipRecord.node_scores; missing ids score 0).
    robot_id: the robot that stored the clip, also given to memories that do not name one (TextNode).
    names: id -> learnt name, for items that carry none (ClipRecord.names)."""
    memories = tuple(
        replace(memory, robot_id=memory.robot_id or robot_id)
        for memory in (
            memory_of(item, None if node_scores is None else node_scores.get(item.node_id, 0.0), names)
            for item in items
        )
    )
    return Clip(clip_index=int(clip_index), score=float(score), memories=memories, robot_id=robot_id)


def memory_error(
    where: str, code: int, message: str, query_codes: Collection[int]
) -> MemoryQueryRejected | MemoryUnavailable:
    """The exception for a memory error code: query_codes (empty/too long/bad argument) reject the query,
    any other code (store unavailable, internal error) means memory is unavailable."""
    text = f"{where}: error {code}: {message}"
    return MemoryQueryRejected(text) if code in query_codes else MemoryUnavailable(text)


def entity_ids_in(text: str) -> list[str]:
    """Entity ids mentioned in text, in order of first appearance, without angle brackets."""
    seen: list[str] = []
    for match in ENTITY_ID_RE.finditer(text):
        entity_id = match.group(1) or match.group(2)
        if entity_id not in seen:
            seen.append(entity_id)
    return seen


def entity_names(client: object, entity_ids: Collection[str], people: bool = False) -> dict[str, str]:
    """Names memory knows, in one lookup: id -> name ("" when its person has none; ids memory does not
    know are left out), and with people every named person (person id -> name). Clients offer it as the
    optional `entity_names` method (memory's get_names); one that offers only `entity_name` is asked id
    by id and cannot list people; one with neither knows no names."""
    lookup = getattr(client, "entity_names", None)
    if lookup is not None:
        return dict(lookup(list(entity_ids), people))
    if getattr(client, "entity_name", None) is None:
        return {}
    return {entity_id: entity_name(client, entity_id) or "" for entity_id in entity_ids}


def entity_name(client: object, entity_id: str) -> str | None:
    """Name memory knows for an entity, when the client offers a lookup (optional `entity_name` method)."""
    lookup = getattr(client, "entity_name", None)
    if lookup is None:
        return None
    name = lookup(entity_id)
    return name or None
