"""The storage interface under MemoryGraph: what a back-end (SQLite, Milvus) must provide.

The graph keeps its working state in RAM (records, caches, ANN indexes) so searches never wait on
storage; a back-end only (1) hands the whole stored state over when the memory opens (`load`) and
(2) makes one clip's changes durable atomically (`transaction`, whose writer receives every change
the graph makes). The graph, the search and the nodes above it do not change per back-end.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from m3_memory.graph.records import EntityRecord, Sighting, TextNode
from m3_memory.place.poses import PoseSample
from m3_memory.store.ann_index import CosineIndex


@dataclass
class Snapshot:
    """Everything a back-end holds, in the order the graph rebuilds its caches from."""

    clips: list[tuple[int, int, int, int, list[str]]] = field(default_factory=list)  # index, start, end, stored, ids
    text_nodes: list[TextNode] = field(default_factory=list)  # in seq order, entity_ids filled in
    text_vectors: np.ndarray | None = None  # row i = text_nodes[i]; may have spare rows past the end
    text_index: CosineIndex | None = None  # a saved index matching text_nodes exactly, or None (rebuild)
    node_clips: list[tuple[str, int]] = field(default_factory=list)  # (semantic node, clip), written order
    sightings: list[Sighting] = field(default_factory=list)  # every entity's observations per clip, clip order
    entities: list[EntityRecord] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # merged person -> survivor
    entity_samples: dict[str, list[np.ndarray]] = field(default_factory=dict)  # entity -> embeddings, slot order
    evidence: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)  # (id1<id2) -> (conf, count)
    # Read by copies between back-ends (m3_memory.store.backend_copy), not by the graph:
    evidence_at: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)  # -> (clip, stamp_ns)
    alias_clips: dict[str, int] = field(default_factory=dict)  # merged person -> clip of the merge
    node_clip_deltas: list[tuple[str, int, float]] = field(default_factory=list)  # every weight change, in order
    counters: dict[str, int] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)


class StoreWriter(Protocol):
    """The changes of one clip (or one bulk batch), made durable together when the transaction ends."""

    def ensure_text_dim(self, dim: int) -> None:
        """Record the text embedding dimension once (a store never mixes dimensions)."""

    def next_id(self, kind: str) -> int:
        """The next never-reused number of an id counter (text, face, voice, person)."""

    def set_counter(self, kind: str, value: int) -> None:
        """Advance a counter to value (bulk ingest numbers its nodes itself)."""

    def set_meta(self, key: str, value: str) -> None: ...

    def add_clip(self, clip_index: int, start_ns: int, end_ns: int, stored_ns: int, keyframe_jpeg: bytes) -> None: ...

    def add_clips(self, rows: list[tuple[int, int, int, int, list[str], bytes]]) -> None:
        """(clip_index, start_ns, end_ns, stored_ns, entity_ids, keyframe_jpeg) of new clips."""

    def set_clip_entities(self, clip_index: int, entity_ids: list[str]) -> None: ...

    def add_entity(self, record: EntityRecord) -> None: ...

    def save_entity(self, record: EntityRecord) -> None:
        """Name, person, counts, times and name votes of an entity as they are now."""

    def set_crop(self, entity_id: str, score: float, jpeg: bytes) -> None: ...

    def set_samples(self, entity_id: str, samples: list[np.ndarray]) -> None:
        """Replace an entity's embedding samples (slot order)."""

    def put_match(self, id1: str, id2: str, confidence: float, count: int, clip_index: int, stamp_ns: int) -> None: ...

    def merge_person(self, gone: str, keep: str, clip_index: int, aliases: list[str], members: list[EntityRecord]):
        """gone is deleted and becomes an alias of keep; its former aliases (old ids) and its members
        (records already pointing at keep) are given so a back-end need not look them up."""

    def add_text_nodes(self, nodes: list[TextNode], vectors: np.ndarray) -> None:
        """New memories (row i of vectors is nodes[i]'s embedding) with their entity edges and places."""

    def add_clip_path(self, clip_index: int, path: list[PoseSample]) -> None:
        """The robot's path through a new clip (stamp order; downsampled by the graph)."""

    def set_validity(self, node: TextNode) -> None:
        """Store node.valid_until_ns and node.superseded_by as they are now (a newer memory replaced it)."""

    def add_sighting(self, sighting: Sighting) -> None:
        """An entity's observations in a clip (one per entity and clip; a later one replaces it)."""

    def set_weight(self, node: TextNode) -> None:
        """Store node.weight as it is now."""

    def add_node_clip(self, node_id: str, clip_index: int, delta: float) -> None:
        """Add delta to a semantic memory's weight change in a clip (creation: +1)."""


class MemoryBackend(Protocol):
    """Durable storage of a memory; see the module docstring for what it is asked to do."""

    location: str  # where the memory lives (a directory, a Milvus URI), for messages and stats

    def load(self, text_dim: int) -> Snapshot:
        """All stored state; raises StoreError when it is damaged or of another text dimension."""

    def transaction(self) -> AbstractContextManager[StoreWriter]:
        """One atomic write: all of it is stored when the block ends, none of it on an exception."""

    def get_meta(self, key: str) -> str | None: ...

    def counters(self) -> dict[str, int]:
        """Current id counters (the graph predicts the ids a clip will create from them)."""

    def entity_number(self, counter: int) -> int:
        """The number of the entity a counter value mints (a fleet member's are disjoint from others')."""

    def people(self) -> Snapshot | None:
        """Entities, samples, merges and evidence as all robots stored them, when people are shared
        (a fleet); None when they are not. Raises StoreError while the storage is unreachable."""

    def flush_pending(self) -> int:
        """Write what waits for an unreachable storage (Milvus' on-disk buffer); how many clips."""

    def entity_crop(self, entity_id: str) -> bytes: ...

    def clip_path(self, clip_index: int) -> list[PoseSample]:
        """A stored clip's path, stamp order; [] when it has none (no pose topic then)."""

    @property
    def schema_version(self) -> int: ...

    def disk_bytes(self) -> int: ...

    def save_text_index(self, index: CosineIndex, nodes: list[TextNode]) -> bool:
        """Keep the text index (holding nodes, in seq order) for a fast next open; False when not saved."""

    def close(self) -> None: ...
