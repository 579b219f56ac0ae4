"""The Milvus back-end's configuration and its StoreWriter: one clip's changes as rows, buffered
until the clip ends (m3_memory.milvus.backend writes them, or queues them while Milvus is away).

Records are keyed "<namespace>/<kind>/<key>": the namespace is the robot_id for a robot's own state
(clips, memories, weights, counters, meta) and, for people (entities, samples, crops, merges,
match evidence), "fleet" when the robot is a fleet member (fleet_slot > 0), else the robot_id.
"""

from __future__ import annotations

import base64
import time
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from m3_memory.graph.records import EntityRecord, Place, Sighting, TextNode
from m3_memory.place.poses import PoseSample

PEOPLE_KINDS = ("entity", "samples", "crop", "alias", "evidence")
FLEET_NAMESPACE = "fleet"
FLEET_SLOTS = 1000  # a fleet member's n-th id number is n * FLEET_SLOTS + fleet_slot

PLACEHOLDER = [1.0, 0.0]  # the records collection's vector (Milvus requires one per collection)
MAX_TEXT_BYTES = 65535  # the text field's max_length
MAX_JSON_BYTES = 60000  # Milvus' JSON field limit is 64 KiB; larger crops are not stored
TEXT_FIELDS = ["node_id", "seq", "kind", "text", "clip_index", "start_ns", "end_ns", "entity_ids"]
# A memory's place as scalar columns of the text collection, so a fleet search filters by place in Milvus
# (place_frame "" = no place). Collections made before them lack them: their places stay in "place" records only.
PLACE_FIELDS = ["place_frame", "place_x", "place_y", "place_yaw", "place_region"]


def place_values(place: Place | None) -> dict:
    """A memory's place as PLACE_FIELDS values (metres and radians in place_frame)."""
    if place is None:
        return {"place_frame": "", "place_x": 0.0, "place_y": 0.0, "place_yaw": 0.0, "place_region": ""}
    return {"place_frame": place.frame_id, "place_x": place.x, "place_y": place.y, "place_yaw": place.yaw,
            "place_region": place.region}  # fmt: skip


def place_of_row(row: dict) -> Place | None:
    """The place of a text row read with PLACE_FIELDS (None: no place, or a collection without the columns)."""
    if not row.get("place_frame"):
        return None
    return Place(row["place_frame"], row["place_x"], row["place_y"], row["place_yaw"], row["place_region"])


@dataclass
class MilvusConfig:
    """Node parameters milvus_* and robot_id (defaults documented in config/m3.yaml)."""

    uri: str = "http://127.0.0.1:19530"  # http(s)://host:port, or a local directory served by milvus-lite
    collection_prefix: str = "m3"
    robot_id: str = "robot"
    index_type: str = "HNSW"
    index_params: str = '{"M": 16, "efConstruction": 200}'
    search_params: str = '{"ef": 128}'
    fleet_slot: int = 0  # 1..999: a fleet member (people shared, ids n * 1000 + slot); 0: a robot alone
    spool_dir: str = ""  # clips waiting for an unreachable server ("" = ~/.m3/milvus_spool/<prefix>/<robot_id>)
    spool_max_mb: float = 256.0
    timeout_s: int = 5  # one Milvus call; then the clip goes to the spool
    token_env: str = "MILVUS_TOKEN"  # environment variable holding the server's token ("user:password" or an API key)


def _vec_to_b64(vectors: list[np.ndarray]) -> str:
    return base64.b64encode(np.asarray(vectors, dtype="<f4").tobytes()).decode("ascii")


def b64_to_vecs(text: str, dim: int) -> list[np.ndarray]:
    flat = np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)
    return list(flat.reshape(-1, dim))


class RowKeys(Protocol):
    """What the writer needs of its back-end (MilvusBackend): row keys, the robot, stored metadata and
    the counters and metadata a transaction carries (a protocol, so the writer never imports the back-end)."""

    robot_id: str
    place_columns: bool  # the text collection has PLACE_FIELDS
    _counters: dict[str, int]
    _meta_pending: dict[str, str]

    def key(self, kind: str, key: str) -> str: ...

    def get_meta(self, key: str) -> str | None: ...


class MilvusWriter:
    """StoreWriter that buffers one clip's changes; MilvusBackend.transaction writes them at the end."""

    def __init__(self, backend: RowKeys) -> None:
        self.backend = backend
        self.counters = dict(backend._counters)
        self.records: dict[str, dict] = {}  # key -> record (last write wins)
        self.deletes: set[str] = set()
        self.text_rows: list[dict] = []
        self.clip_rows: dict[str, dict] = {}
        self.new_nodes: dict[int, list[str]] = {}  # clip -> its new memories (listed in its clip record)
        self._order = time.time_ns()

    def _put(self, kind: str, key: str, data: dict) -> None:
        full = self.backend.key(kind, key)
        self.deletes.discard(full)
        self.records[full] = {"key": full, "robot_id": self.backend.robot_id, "kind": kind, "data": data}

    def ensure_text_dim(self, dim: int) -> None:
        if self.backend.get_meta("text_dim") is None:
            self.set_meta("text_dim", str(dim))

    def next_id(self, kind: str) -> int:
        self.counters[kind] = self.counters.get(kind, 0) + 1
        self._put("counter", kind, {"value": self.counters[kind]})
        return self.counters[kind]

    def set_counter(self, kind: str, value: int) -> None:
        self.counters[kind] = value
        self._put("counter", kind, {"value": value})

    def set_meta(self, key: str, value: str) -> None:
        self.backend._meta_pending[key] = value
        self._put("meta", key, {"value": value})

    def add_clip(self, clip_index: int, start_ns: int, end_ns: int, stored_ns: int, keyframe_jpeg: bytes) -> None:
        self.add_clips([(clip_index, start_ns, end_ns, stored_ns, [], keyframe_jpeg)])

    def add_clips(self, rows: list[tuple[int, int, int, int, list[str], bytes]]) -> None:
        for clip_index, start, end, stored, ids, _jpeg in rows:  # keyframes stay with the robot (not stored)
            data = {"clip_index": clip_index, "start_ns": start, "end_ns": end, "stored_ns": stored, "entity_ids": ids}
            self.clip_rows[self.backend.key("clip", str(clip_index))] = data
            self.new_nodes.setdefault(clip_index, [])

    def set_clip_entities(self, clip_index: int, entity_ids: list[str]) -> None:
        self.clip_rows[self.backend.key("clip", str(clip_index))]["entity_ids"] = list(entity_ids)

    def add_entity(self, record: EntityRecord) -> None:
        self.save_entity(record)

    def save_entity(self, record: EntityRecord) -> None:
        self._put("entity", record.entity_id, asdict(record))

    def set_crop(self, entity_id: str, score: float, jpeg: bytes) -> None:
        data = base64.b64encode(jpeg).decode("ascii")
        if len(data) < MAX_JSON_BYTES:
            self._put("crop", entity_id, {"score": score, "jpeg": data})

    def set_samples(self, entity_id: str, samples: list[np.ndarray]) -> None:
        self._put("samples", entity_id, {"dim": int(samples[0].shape[0]), "b64": _vec_to_b64(samples)})

    def put_match(self, id1: str, id2: str, confidence: float, count: int, clip_index: int, stamp_ns: int) -> None:
        data = {"id1": id1, "id2": id2, "confidence": confidence, "count": count, "clip": clip_index, "stamp": stamp_ns}
        self._put("evidence", f"{id1}|{id2}", data)

    def merge_person(self, gone: str, keep: str, clip_index: int, aliases: list[str], members: list[EntityRecord]):
        self.records.pop(self.backend.key("entity", gone), None)
        self.deletes.add(self.backend.key("entity", gone))
        self._put("alias", gone, {"old": gone, "new": keep, "clip": clip_index})
        for old in aliases:
            self._put("alias", old, {"old": old, "new": keep, "clip": clip_index})
        for record in members:
            self.save_entity(record)

    def add_text_nodes(self, nodes: list[TextNode], vectors: np.ndarray) -> None:
        for node, vector in zip(nodes, vectors, strict=True):
            size = len(node.text.encode("utf-8"))
            if size > MAX_TEXT_BYTES:  # refused now: Milvus would refuse it on every retry of a buffered clip
                raise ValueError(f"memory {node.node_id} is {size} bytes; Milvus holds at most {MAX_TEXT_BYTES}")
            row = {name: getattr(node, name) for name in TEXT_FIELDS}
            row.update(node_key=self.backend.key("text", node.node_id), robot_id=self.backend.robot_id)
            if self.backend.place_columns:
                row.update(place_values(node.place))
            row["vector"] = np.asarray(vector, dtype=np.float32).tolist()
            self.text_rows.append(row)
            self.new_nodes.setdefault(node.clip_index, []).append(node.node_id)
            if node.place is not None:
                self._put("place", node.node_id, asdict(node.place))

    def set_validity(self, node: TextNode) -> None:
        self._put("validity", node.node_id, {"until": node.valid_until_ns, "by": node.superseded_by})

    def add_sighting(self, sighting: Sighting) -> None:
        self._put("sighting", f"{sighting.entity_id}|{sighting.clip_index}", asdict(sighting))

    def add_clip_path(self, clip_index: int, path: list[PoseSample]) -> None:
        if path:
            self._put("path", str(clip_index), {"samples": [asdict(p) for p in path]})

    def set_weight(self, node: TextNode) -> None:
        self._put("weight", node.node_id, {"value": node.weight})

    def add_node_clip(self, node_id: str, clip_index: int, delta: float) -> None:
        full = self.backend.key("nodeclip", f"{node_id}|{clip_index}")
        old = self.records.get(full, {}).get("data", {}).get("delta", 0.0)
        self._order += 1
        data = {"node": node_id, "clip": clip_index, "delta": old + delta, "order": self._order}
        self._put("nodeclip", f"{node_id}|{clip_index}", data)

    def payload(self) -> dict:
        """The clip's writes as plain data: what is sent to Milvus, or queued in the spool."""
        clips = [
            {"key": key, "robot_id": self.backend.robot_id, "kind": "clip", "vector": PLACEHOLDER,
             "data": {**data, "nodes": self.new_nodes.get(data["clip_index"], [])}}
            for key, data in self.clip_rows.items()
        ]  # fmt: skip
        records = [{**r, "vector": PLACEHOLDER} for r in self.records.values()]
        return {"text": self.text_rows, "records": records, "deletes": sorted(self.deletes), "clips": clips}
