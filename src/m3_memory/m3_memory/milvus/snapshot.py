"""Milvus rows read back into a Snapshot: the reverse of the rows the writer makes (m3_memory.milvus.writer).

Why apart from the back-end (m3_memory.milvus.backend): it queries Milvus and keeps this robot's
counters and metadata; turning the records and text rows it read into the graph's records is plain
data work, the same for a robot's own memory and for the people a fleet shares.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from m3_memory.graph.backend import Snapshot
from m3_memory.graph.records import EntityRecord, Place, Sighting, TextNode
from m3_memory.milvus.writer import TEXT_FIELDS, b64_to_vecs


def add_people(by_kind: dict[str, dict[str, dict]], snap: Snapshot) -> Snapshot:
    """The people (entities, merges, samples, match evidence) of records grouped by kind, into snap."""
    snap.aliases = {d["old"]: d["new"] for d in by_kind.get("alias", {}).values()}
    # A robot may save a person another robot merged away a moment before: the merge wins.
    entities = [EntityRecord(**d) for d in by_kind.get("entity", {}).values() if d["entity_id"] not in snap.aliases]
    snap.entities = sorted(entities, key=lambda r: (r.kind, r.seq))
    snap.alias_clips = {d["old"]: d["clip"] for d in by_kind.get("alias", {}).values()}
    for entity_id, data in by_kind.get("samples", {}).items():
        snap.entity_samples[entity_id] = b64_to_vecs(data["b64"], data["dim"])
    for d in by_kind.get("evidence", {}).values():
        snap.evidence[(d["id1"], d["id2"])] = (float(d["confidence"]), int(d["count"]))
        snap.evidence_at[(d["id1"], d["id2"])] = (int(d["clip"]), int(d["stamp"]))
    return snap


def add_clips(by_kind: dict[str, dict[str, dict]], snap: Snapshot) -> set[str]:
    """The clip records into snap in clip order; returns the memories they list (a text row no clip
    lists is from a clip whose write broke off)."""
    listed: set[str] = set()
    for data in sorted(by_kind.get("clip", {}).values(), key=lambda d: d["clip_index"]):
        row = (data["clip_index"], data["start_ns"], data["end_ns"], data["stored_ns"], data["entity_ids"])
        snap.clips.append(row)
        listed.update(data.get("nodes", []))
    return listed


def add_memories(by_kind: dict[str, dict[str, dict]], text_rows: Iterable[dict], text_dim: int, snap: Snapshot) -> None:
    """The text memories (text_rows, read as they are iterated, with their weights, places and validity
    records), the sightings and the memories' clip links, into snap."""
    weights = {name: float(data["value"]) for name, data in by_kind.get("weight", {}).items()}
    places = {name: Place(**data) for name, data in by_kind.get("place", {}).items()}
    validity = by_kind.get("validity", {})
    rows = sorted(text_rows, key=lambda r: r["seq"])
    snap.text_vectors = np.zeros((len(rows) + 1024, text_dim), dtype=np.float32)
    for i, row in enumerate(rows):
        values = [row[name] for name in TEXT_FIELDS[:7]]
        weight = weights.get(row["node_id"], 1.0)
        place, valid = places.get(row["node_id"]), validity.get(row["node_id"], {"until": 0, "by": ""})
        snap.text_nodes.append(TextNode(*values, weight, list(row["entity_ids"]), place, valid["until"], valid["by"]))
        snap.text_vectors[i] = np.asarray(row["vector"], dtype=np.float32)
    sightings = [
        Sighting(**{**d, "place": Place(**d["place"]) if d["place"] else None})
        for d in by_kind.get("sighting", {}).values()
    ]
    snap.sightings = sorted(sightings, key=lambda s: (s.clip_index, s.entity_id))
    node_clips = sorted(by_kind.get("nodeclip", {}).values(), key=lambda d: d["order"])
    snap.node_clips = [(d["node"], d["clip"]) for d in node_clips if d["delta"] > 0]
    snap.node_clip_deltas = [(d["node"], d["clip"], d["delta"]) for d in node_clips]
