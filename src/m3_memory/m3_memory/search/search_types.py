"""The search API's plain data: its configuration and what search_node, get_entity and get_stats return."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from m3_memory.graph.records import Place
from m3_memory.search.where import NOWHERE, Where


@dataclass
class SearchConfig:
    max_query_chars: int = 1000
    default_top_k: int = 10
    clip_threshold: float = 0.5
    clip_top_k: int = 2
    max_conversations: int = 256
    robot_id: str = "robot"  # this robot (the node's robot_id; the Milvus back-end's own wins)


@dataclass
class SearchHit:
    """One search_node result: a text memory or an entity (MemoryItem)."""

    node_id: str
    kind: str
    text: str
    clip_index: int
    start_ns: int
    end_ns: int
    entity_ids: list[str]
    weight: float
    score: float
    robot_id: str = ""  # the robot that stored a text memory; "" for entities (people are the fleet's)
    place: Place | None = None  # where a text memory happened; None without a pose, and for entities
    valid_until_ns: int = 0  # when a newer memory replaced what it states, as known at the query's as-of time
    superseded_by: str = ""  # that newer memory; "" = still valid
    entity_names: list[str] = field(default_factory=list)  # learnt name of each entity_ids entry's person, "" none


@dataclass
class EntityView:
    """get_entity's answer (Entity)."""

    entity_id: str
    kind: str
    name: str
    aliases: list[str]
    member_ids: list[str]
    observation_count: int
    first_clip: int
    last_clip: int
    first_ns: int
    last_ns: int
    memory_ids: list[str]
    crop_jpeg: bytes = b""
    label: str = ""  # an object's class or a text's reading


@dataclass
class Stats:
    clips: int
    last_clip_index: int
    episodic: int
    semantic: int
    faces: int
    voices: int
    persons: int
    index_size: int
    disk_bytes: int
    schema_version: int
    memory_dir: str
    objects: int = 0  # object entities (things perception's detector tracked)
    texts: int = 0  # text entities (written text perception read)
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ClipQuery:
    """One checked search_clip request: what this robot's graph and the fleet's Milvus are searched with."""

    vectors: np.ndarray  # unit embeddings of the query's alias variants
    top_k: int
    threshold: float
    before_clip: int
    before_stamp_ns: int
    labels: dict[str, str]  # the conversation's tag renderings (MemorySearch.render_tags)
    where: Where = NOWHERE  # the request's time and place window
    named: Where | None = None  # the window of a region the query text names (MemorySearch.region_named)
