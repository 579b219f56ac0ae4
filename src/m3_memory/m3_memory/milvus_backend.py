"""The Milvus back-end: the memory in two Milvus collections, through pymilvus' MilvusClient.

`<prefix>_text` holds the text memories with their embeddings (the vector field, indexed with the
configured index type); `<prefix>_records` holds everything else as JSON records keyed by
"<robot_id>/<kind>/<key>" (clips, entities, face/voice samples, crops, match evidence, merges,
weights, id counters, meta): Milvus needs a vector field in every collection, so records carry a
2-d placeholder. Every row has robot_id, so one Milvus serves a fleet and a robot loads its own.

Milvus has no transactions: a clip's changes are buffered and written when the clip ends, its text
rows first and its clip record last; the clip record lists the clip's new memories, so text rows
of a clip whose write broke off are ignored on load and overwritten (same primary keys) when the
clip is stored again.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np

from m3_memory.backend import Snapshot
from m3_memory.errors import StoreError
from m3_memory.milvus_spool import ClipSpool
from m3_memory.records import EntityRecord, TextNode

PLACEHOLDER = [1.0, 0.0]  # the records collection's vector (Milvus requires one per collection)
MAX_JSON_BYTES = 60000  # Milvus' JSON field limit is 64 KiB; larger crops are not stored
TEXT_FIELDS = ["node_id", "seq", "kind", "text", "clip_index", "start_ns", "end_ns", "entity_ids"]


@dataclass
class MilvusConfig:
    """Node parameters milvus_* and robot_id (defaults documented in config/m3.yaml)."""

    uri: str = "http://127.0.0.1:19530"  # http(s)://host:port, or a local directory served by milvus-lite
    collection_prefix: str = "m3"
    robot_id: str = "robot"
    index_type: str = "HNSW"
    index_params: str = '{"M": 16, "efConstruction": 200}'
    search_params: str = '{"ef": 128}'
    spool_dir: str = ""  # clips waiting for an unreachable server ("" = ~/.m3/milvus_spool/<prefix>/<robot_id>)
    spool_max_mb: float = 256.0
    timeout_s: int = 5  # one Milvus call; then the clip goes to the spool


def _vec_to_b64(vectors: list[np.ndarray]) -> str:
    return base64.b64encode(np.asarray(vectors, dtype="<f4").tobytes()).decode("ascii")


def _b64_to_vecs(text: str, dim: int) -> list[np.ndarray]:
    flat = np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)
    return list(flat.reshape(-1, dim))


class MilvusWriter:
    """StoreWriter that buffers one clip's changes; MilvusBackend.transaction writes them at the end."""

    def __init__(self, backend: MilvusBackend) -> None:
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
            row = {name: getattr(node, name) for name in TEXT_FIELDS}
            row.update(node_key=self.backend.key("text", node.node_id), robot_id=self.backend.robot_id)
            row["vector"] = np.asarray(vector, dtype=np.float32).tolist()
            self.text_rows.append(row)
            self.new_nodes.setdefault(node.clip_index, []).append(node.node_id)

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


class MilvusBackend:
    """MemoryBackend over a Milvus server (or a local directory served by a milvus-lite child process)."""

    def __init__(self, config: MilvusConfig, text_dim: int) -> None:
        from pymilvus import MilvusClient
        from pymilvus.exceptions import MilvusException

        # Milvus Lite has no MVCC timestamps: each query iterator warns that it uses the client's clock.
        logging.getLogger("pymilvus.orm.iterator").setLevel(logging.ERROR)

        self.config, self.text_dim, self.robot_id = config, text_dim, config.robot_id
        self.text_name = f"{config.collection_prefix}_text"
        self.records_name = f"{config.collection_prefix}_records"
        self.server = None
        self.spool: ClipSpool | None = None  # set below; close() may run before
        uri = config.uri
        if not uri.startswith(("http://", "https://", "tcp://", "grpc://")):
            from m3_memory.milvus_server import MilvusLiteServer

            self.server = MilvusLiteServer(uri).start()
            uri = self.server.uri
        self.location = config.uri
        self._address = self._host_port(uri)
        spool_dir = config.spool_dir or f"~/.m3/milvus_spool/{config.collection_prefix}/{config.robot_id}"
        self.spool = ClipSpool(spool_dir, int(config.spool_max_mb * 1024 * 1024))
        self._counters: dict[str, int] = {}
        self._meta: dict[str, str] = {}
        self._meta_pending: dict[str, str] = {}
        self._errors = (MilvusException, ConnectionError, OSError)
        try:
            self.client = MilvusClient(uri=uri, timeout=30)
            self._ensure_collections()
        except self._errors as error:
            self.close()
            raise StoreError(f"Milvus at {config.uri} is unavailable: {error}") from error

    @staticmethod
    def _host_port(uri: str) -> tuple[str, int]:
        rest = uri.split("://", 1)[-1].split("/", 1)[0]
        host, _, port = rest.rpartition(":")
        return (host or rest, int(port)) if port.isdigit() else (rest, 19530)

    def reachable(self) -> bool:
        """A TCP connection to the server opens within a second (a down server fails fast, not
        after pymilvus' retries)."""
        try:
            with socket.create_connection(self._address, timeout=1.0):
                return True
        except OSError:
            return False

    def write(self, payload: dict) -> None:
        """Text rows, then records and deletes, then the clip records (a clip exists once it is listed)."""
        if not self.reachable():
            raise ConnectionError(f"no connection to {self._address[0]}:{self._address[1]}")
        timeout = int(self.config.timeout_s)
        for name, rows in ((self.text_name, payload["text"]), (self.records_name, payload["records"])):
            for start in range(0, len(rows), 1000):
                self.client.upsert(name, rows[start : start + 1000], timeout=timeout)
        if payload["deletes"]:
            self.client.delete(self.records_name, ids=payload["deletes"], timeout=timeout)
        for start in range(0, len(payload["clips"]), 1000):
            self.client.upsert(self.records_name, payload["clips"][start : start + 1000], timeout=timeout)

    def flush_spool(self) -> int:
        """Write the queued clips to Milvus in order; returns how many; raises when unreachable."""
        done, pending = 0, self.spool.pending()
        if pending and self.reachable():
            self._ensure_collections()  # the server may have restarted (collections released)
        for path in pending:
            self.write(self.spool.read(path))
            self.spool.remove(path)
            done += 1
        return done

    def key(self, kind: str, key: str) -> str:
        return f"{self.robot_id}/{kind}/{key}"

    def _ensure_collections(self) -> None:
        from pymilvus import DataType, MilvusClient

        if not self.client.has_collection(self.text_name):
            schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("node_key", DataType.VARCHAR, is_primary=True, max_length=256)
            schema.add_field("robot_id", DataType.VARCHAR, max_length=128)
            schema.add_field("node_id", DataType.VARCHAR, max_length=128)
            for name in ("seq", "clip_index", "start_ns", "end_ns"):
                schema.add_field(name, DataType.INT64)
            schema.add_field("kind", DataType.VARCHAR, max_length=16)
            schema.add_field("text", DataType.VARCHAR, max_length=65535)
            schema.add_field("entity_ids", DataType.JSON)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.text_dim)
            index = self.client.prepare_index_params()
            index.add_index(
                field_name="vector", index_type=self.config.index_type, metric_type="COSINE",
                params=json.loads(self.config.index_params or "{}"),
            )  # fmt: skip
            self.client.create_collection(self.text_name, schema=schema, index_params=index, consistency_level="Strong")
        if not self.client.has_collection(self.records_name):
            schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=512)
            schema.add_field("robot_id", DataType.VARCHAR, max_length=128)
            schema.add_field("kind", DataType.VARCHAR, max_length=32)
            schema.add_field("data", DataType.JSON)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=len(PLACEHOLDER))
            index = self.client.prepare_index_params()
            index.add_index(field_name="vector", index_type="FLAT", metric_type="L2")
            self.client.create_collection(
                self.records_name, schema=schema, index_params=index, consistency_level="Strong"
            )
        for name in (self.text_name, self.records_name):  # a restarted server holds them released
            self.client.load_collection(name)

    def _iterate(self, collection: str, expr: str, fields: list[str]) -> Iterator[dict]:
        iterator = self.client.query_iterator(collection, batch_size=4000, filter=expr, output_fields=fields)
        try:
            while batch := iterator.next():
                yield from batch
        finally:
            iterator.close()

    def query_records(self, *conditions: str) -> list[dict]:
        """This robot's records matching every condition (Milvus filter expressions)."""
        expr = " and ".join([f'robot_id == "{self.robot_id}"', *conditions])
        return list(self._iterate(self.records_name, expr, ["key", "kind", "data"]))

    # -- reading ----------------------------------------------------------------------------------
    def load(self, text_dim: int) -> Snapshot:
        """Queued clips are written first: the snapshot must hold them (StoreError while unreachable)."""
        try:
            self.flush_spool()
            return self._load(text_dim)
        except self._errors as error:
            raise StoreError(f"Milvus at {self.config.uri} is unavailable: {error}") from error

    def _load(self, text_dim: int) -> Snapshot:
        snap = Snapshot()
        by_kind: dict[str, dict[str, dict]] = {}  # kind -> name (the key's last part) -> data
        for record in self.query_records('kind != "crop"'):  # crops are read one at a time, when asked for
            by_kind.setdefault(record["kind"], {})[record["key"].split("/", 2)[2]] = record["data"]
        self._meta = {name: str(data["value"]) for name, data in by_kind.get("meta", {}).items()}
        stored_dim = self._meta.get("text_dim")
        if stored_dim is not None and int(stored_dim) != text_dim:
            raise ValueError(f"store holds {stored_dim}-d text embeddings; the embedder gives {text_dim}-d")
        self._counters = {name: int(data["value"]) for name, data in by_kind.get("counter", {}).items()}
        listed: set[str] = set()
        for data in sorted(by_kind.get("clip", {}).values(), key=lambda d: d["clip_index"]):
            row = (data["clip_index"], data["start_ns"], data["end_ns"], data["stored_ns"], data["entity_ids"])
            snap.clips.append(row)
            listed.update(data.get("nodes", []))
        weights = {name: float(data["value"]) for name, data in by_kind.get("weight", {}).items()}
        expr = f'robot_id == "{self.robot_id}"'
        rows = [r for r in self._iterate(self.text_name, expr, [*TEXT_FIELDS, "vector"]) if r["node_id"] in listed]
        rows.sort(key=lambda r: r["seq"])
        snap.text_vectors = np.zeros((len(rows) + 1024, text_dim), dtype=np.float32)
        for i, row in enumerate(rows):
            values = [row[name] for name in TEXT_FIELDS[:7]]
            weight = weights.get(row["node_id"], 1.0)
            snap.text_nodes.append(TextNode(*values, weight=weight, entity_ids=list(row["entity_ids"])))
            snap.text_vectors[i] = np.asarray(row["vector"], dtype=np.float32)
        node_clips = sorted(by_kind.get("nodeclip", {}).values(), key=lambda d: d["order"])
        snap.node_clips = [(d["node"], d["clip"]) for d in node_clips if d["delta"] > 0]
        entities = [EntityRecord(**d) for d in by_kind.get("entity", {}).values()]
        snap.entities = sorted(entities, key=lambda r: (r.kind, r.seq))
        snap.aliases = {d["old"]: d["new"] for d in by_kind.get("alias", {}).values()}
        snap.alias_clips = {d["old"]: d["clip"] for d in by_kind.get("alias", {}).values()}
        snap.node_clip_deltas = [(d["node"], d["clip"], d["delta"]) for d in node_clips]
        snap.counters, snap.meta = dict(self._counters), dict(self._meta)
        for entity_id, data in by_kind.get("samples", {}).items():
            snap.entity_samples[entity_id] = _b64_to_vecs(data["b64"], data["dim"])
        for d in by_kind.get("evidence", {}).values():
            snap.evidence[(d["id1"], d["id2"])] = (float(d["confidence"]), int(d["count"]))
            snap.evidence_at[(d["id1"], d["id2"])] = (int(d["clip"]), int(d["stamp"]))
        return snap

    def get_meta(self, key: str) -> str | None:
        return self._meta_pending.get(key, self._meta.get(key))

    def counters(self) -> dict[str, int]:
        return dict(self._counters)

    def entity_crop(self, entity_id: str) -> bytes:
        found = self.query_records('kind == "crop"', f'key == "{self.key("crop", entity_id)}"')
        return base64.b64decode(found[0]["data"]["jpeg"]) if found else b""

    @property
    def schema_version(self) -> int:
        return 1

    def disk_bytes(self) -> int:
        return 0  # held by the Milvus server

    def save_text_index(self, index, count: int, max_seq: int) -> bool:
        return False  # rebuilt from Milvus on open

    def integrity_check(self) -> list[str]:
        """Problems found (empty = healthy): listed memories without a text row, members of no person."""
        snap = self._load(self.text_dim)
        problems = []
        stored = {node.node_id for node in snap.text_nodes}
        for clip in self.query_records('kind == "clip"'):
            missing = sorted(set(clip["data"].get("nodes", [])) - stored)
            if missing:
                problems.append(f"clip {clip['data']['clip_index']}: memories {missing} have no text row")
        people = {r.entity_id for r in snap.entities if r.kind == "person"} | set(snap.aliases)
        for record in snap.entities:
            if record.kind != "person" and record.person_id not in people:
                problems.append(f"{record.entity_id}: person {record.person_id!r} is not stored")
        return problems

    # -- writing ----------------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[MilvusWriter]:
        writer = MilvusWriter(self)
        try:
            yield writer
            payload = writer.payload()
            try:
                self.flush_spool()  # older clips first: writes reach Milvus in order
                self.write(payload)
            except self._errors as error:
                self.spool.append(payload, f"{type(error).__name__}: {error}")
        except BaseException:
            self._meta_pending.clear()
            raise
        self._counters = writer.counters
        self._meta.update(self._meta_pending)
        self._meta_pending.clear()

    def close(self) -> None:
        """Queued clips that still cannot be written stay in the spool for the next start."""
        client = getattr(self, "client", None)
        if client is not None and self.spool is not None and self.spool.pending():
            try:
                self.flush_spool()
            except self._errors:
                pass
        if client is not None:
            client.close()
        if self.server is not None:
            self.server.stop()
            self.server = None
