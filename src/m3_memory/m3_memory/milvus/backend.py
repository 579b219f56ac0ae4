"""The Milvus back-end: the memory in two Milvus collections, through pymilvus' MilvusClient.

`<prefix>_text` holds the text memories with their embeddings (the vector field, indexed with the
configured index type); `<prefix>_records` holds everything else as JSON records keyed by
"<namespace>/<kind>/<key>" (clips, entities, face/voice samples, crops, match evidence, merges,
weights, id counters, meta; the namespace is the robot_id, or "fleet" for a fleet member's people:
m3_memory.milvus.writer): Milvus needs a vector field in every collection, so records carry a
2-d placeholder (the schemas: m3_memory.milvus.schema). Every row has robot_id, so one Milvus
serves a fleet and a robot loads its own.

Milvus has no transactions: a clip's changes are buffered and written when the clip ends, its text
rows first and its clip record last; the clip record lists the clip's new memories, so text rows
of a clip whose write broke off are ignored on load and overwritten (same primary keys) when the
clip is stored again. A clip counts as stored only once Milvus has flushed it (make_durable): until
then, server down or killed between the write and the flush, it waits in the on-disk spool and is
written again when the server is back.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from m3_memory.errors import StoreError
from m3_memory.graph.backend import Snapshot
from m3_memory.graph.records import TextNode
from m3_memory.milvus.schema import create_missing, text_columns
from m3_memory.milvus.snapshot import add_clips, add_memories, add_people
from m3_memory.milvus.spool import ClipSpool
from m3_memory.milvus.writer import (
    FLEET_NAMESPACE,
    FLEET_SLOTS,
    PEOPLE_KINDS,
    TEXT_FIELDS,
    MilvusConfig,
    MilvusWriter,
)
from m3_memory.place.poses import PoseSample
from m3_memory.store import saved_index
from m3_memory.store.ann_index import CosineIndex


class MilvusBackend:
    """MemoryBackend over a Milvus server (or a local directory served by a milvus-lite child process)."""

    def __init__(self, config: MilvusConfig, text_dim: int) -> None:
        """text_dim: the embedder's dimension; 0 opens existing collections with theirs."""
        import grpc
        from pymilvus import MilvusClient
        from pymilvus.exceptions import MilvusException

        # Milvus Lite has no MVCC timestamps: each query iterator warns that it uses the client's clock.
        logging.getLogger("pymilvus.orm.iterator").setLevel(logging.ERROR)

        self.config, self.text_dim, self.robot_id = config, text_dim, config.robot_id
        self.text_name = f"{config.collection_prefix}_text"
        self.records_name = f"{config.collection_prefix}_records"
        self.server = None
        self.place_columns = False  # the text collection has PLACE_FIELDS (_ensure_collections says)
        self.spool: ClipSpool | None = None  # set below; close() may run before
        uri = config.uri
        if not uri.startswith(("http://", "https://", "tcp://", "grpc://")):
            from m3_memory.milvus.server import MilvusLiteServer

            try:
                self.server = MilvusLiteServer(uri).start()
            except (OSError, RuntimeError) as error:  # not installed, or it did not start
                raise StoreError(f"cannot serve the Milvus Lite directory {uri}: {error}") from error
            uri = self.server.uri
        self.location = config.uri
        self._address = self._host_port(uri)
        spool_dir = config.spool_dir or f"~/.m3/milvus_spool/{config.collection_prefix}/{config.robot_id}"
        self.spool = ClipSpool(spool_dir, int(config.spool_max_mb * 1024 * 1024))
        self._counters: dict[str, int] = {}
        self._meta: dict[str, str] = {}
        self._meta_pending: dict[str, str] = {}
        self._errors = (MilvusException, grpc.RpcError, ConnectionError, OSError)  # pymilvus lets a deadline through
        self.client = None
        try:
            self._check_reachable()  # at once, not after pymilvus' connection timeout
            token = os.environ.get(config.token_env, "") if config.token_env else ""  # never in a parameter file
            self.client = MilvusClient(uri=uri, token=token, timeout=int(config.timeout_s))
            self._ensure_collections()
        except StoreError:
            self.close()
            raise
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

    def _check_reachable(self) -> None:
        """Fail at once while the server is away (pymilvus would retry for minutes)."""
        if not self.reachable():
            raise ConnectionError(f"no connection to {self._address[0]}:{self._address[1]}")

    def write(self, payload: dict) -> None:
        """Text rows, then records and deletes, then the clip records (a clip exists once it is listed)."""
        self._check_reachable()
        timeout = int(self.config.timeout_s)
        for name, rows in ((self.text_name, payload["text"]), (self.records_name, payload["records"])):
            for start in range(0, len(rows), 1000):
                self.client.upsert(name, rows[start : start + 1000], timeout=timeout)
        if payload["deletes"]:
            self.client.delete(self.records_name, ids=payload["deletes"], timeout=timeout)
        for start in range(0, len(payload["clips"]), 1000):
            self.client.upsert(self.records_name, payload["clips"][start : start + 1000], timeout=timeout)

    def make_durable(self, payloads: list[dict]) -> None:
        """Return only once Milvus holds the payloads just written durably (its flush): an upsert is
        acknowledged before the server persists it, and a server killed in between loses it (seen:
        the last few clips before a SIGKILL of milvus-lite gone after its restart). Then their keys are
        read back: a server restarted in the middle of a write (pymilvus retries a failed call against the
        new one) has lost what the old one acknowledged, the clip's record kept and its text rows gone
        (`m3 bench fleet`, 1 run in 6). Raises when unreachable or when a row is missing."""
        self._check_reachable()
        timeout = int(self.config.timeout_s)
        for name in (self.text_name, self.records_name):
            self.client.flush(name, timeout=timeout)
        deleted = {key for payload in payloads for key in payload["deletes"]}
        wanted = (
            (self.text_name, "node_key", [row["node_key"] for p in payloads for row in p["text"]]),
            (self.records_name, "key", [r["key"] for p in payloads for r in (*p["records"], *p["clips"])]),
        )
        for name, field, keys in wanted:
            keys = sorted(set(keys) - deleted)
            for start in range(0, len(keys), 1000):
                chunk = keys[start : start + 1000]
                held = self.client.get(name, ids=chunk, output_fields=[field], timeout=timeout)
                if len(held) < len(chunk):
                    raise ConnectionError(
                        f"Milvus holds {len(held)} of the {len(chunk)} rows just written to {name} "
                        "(a server restarted under the write): written again"
                    )

    def flush_spool(self) -> int:
        """Write the queued clips to Milvus in order and make them durable; only then do they leave the
        spool. Returns how many; raises when unreachable (they stay queued, and are written again:
        upserts on the same keys store nothing twice)."""
        pending = self.spool.pending()
        if not pending:
            return 0
        if self.reachable():
            self._ensure_collections()  # the server may have restarted (collections released)
        payloads = [self.spool.read(path) for path in pending]
        for payload in payloads:
            self.write(payload)
        self.make_durable(payloads)
        for path in pending:
            self.spool.remove(path)
        return len(pending)

    def namespace(self, kind: str) -> str:
        """Whose record this is: the fleet's for people when in a fleet, else this robot's."""
        return FLEET_NAMESPACE if self.config.fleet_slot > 0 and kind in PEOPLE_KINDS else self.robot_id

    def flush_pending(self) -> int:
        """flush_spool for the idle node: 0 while the server is still away."""
        if not self.spool.pending():
            return 0
        try:
            return self.flush_spool()
        except self._errors:
            return 0

    def key(self, kind: str, key: str) -> str:
        return f"{self.namespace(kind)}/{kind}/{key}"

    def entity_number(self, counter: int) -> int:
        """A fleet member's n-th entity is number n * 1000 + fleet_slot: no two robots mint one id."""
        slot = self.config.fleet_slot
        return counter * FLEET_SLOTS + slot if slot > 0 else counter

    def _ensure_collections(self) -> None:
        create_missing(self.client, self.config, self.text_name, self.records_name, self.text_dim)
        self.place_columns, dim = text_columns(self.client, self.text_name)
        if self.text_dim == 0:  # text_dim 0: adopt the stored dimension (reading a memory whatever its model)
            self.text_dim = dim or 0
        if dim != self.text_dim:  # else every write would fail (and wait in the buffer for ever)
            raise StoreError(
                f"Milvus collection {self.text_name} holds {dim}-d text embeddings; the embedder gives "
                f"{self.text_dim}-d: choose another milvus_collection_prefix"
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
        """Queued clips are written first: the snapshot must hold them (StoreError while unreachable);
        the text index saved at the last close comes with it when it matches."""
        try:
            self._check_reachable()
            self._ensure_collections()  # after a server restart the collections are released
            self.flush_spool()
            snap = self._load(text_dim)
        except self._errors as error:
            raise StoreError(f"Milvus at {self.config.uri} is unavailable: {error}") from error
        snap.text_index = self._saved_text_index(snap, text_dim)  # opening only, not the integrity check
        return snap

    def _records_by_kind(self, expr: str) -> dict[str, dict[str, dict]]:
        """kind -> name (the key's last part) -> data, of the records matching expr."""
        by_kind: dict[str, dict[str, dict]] = {}
        for record in self._iterate(self.records_name, expr, ["key", "kind", "data"]):
            by_kind.setdefault(record["kind"], {})[record["key"].split("/", 2)[2]] = record["data"]
        return by_kind

    def _people_expr(self) -> str:
        kinds = json.dumps([kind for kind in PEOPLE_KINDS if kind != "crop"])  # crops: read one at a time
        return f'key like "{self.namespace("entity")}/%" and kind in {kinds}'

    def people(self) -> Snapshot | None:
        """The people every robot stored (fleet members only; None for a robot alone). Queued clips
        are written first so this robot's own changes are not read back older."""
        if self.config.fleet_slot <= 0:
            return None
        try:
            self._check_reachable()
            self.flush_spool()
            return add_people(self._records_by_kind(self._people_expr()), Snapshot())
        except self._errors as error:
            raise StoreError(f"Milvus at {self.config.uri} is unavailable: {error}") from error

    def _load(self, text_dim: int) -> Snapshot:
        snap = Snapshot()
        own = json.dumps([*PEOPLE_KINDS, "path"])  # clip paths are read one clip at a time (clip_path)
        by_kind = self._records_by_kind(f'key like "{self.robot_id}/%" and kind not in {own}')
        add_people(self._records_by_kind(self._people_expr()), snap)
        self._meta = {name: str(data["value"]) for name, data in by_kind.get("meta", {}).items()}
        stored_dim = self._meta.get("text_dim")
        if stored_dim is not None and int(stored_dim) != text_dim:
            raise ValueError(f"store holds {stored_dim}-d text embeddings; the embedder gives {text_dim}-d")
        self._counters = {name: int(data["value"]) for name, data in by_kind.get("counter", {}).items()}
        listed = add_clips(by_kind, snap)
        expr = f'robot_id == "{self.robot_id}"'
        text_rows = (r for r in self._iterate(self.text_name, expr, [*TEXT_FIELDS, "vector"]) if r["node_id"] in listed)
        add_memories(by_kind, text_rows, text_dim, snap)
        snap.counters, snap.meta = dict(self._counters), dict(self._meta)
        return snap

    # -- the text index kept locally (Milvus holds the vectors; rebuilding 100k takes a minute) -----
    def _index_base(self) -> str:
        return os.path.join(self.spool.directory, "text_index")  # beside this robot's clip buffer

    @staticmethod
    def _index_meta(nodes: list[TextNode], dim: int) -> dict:
        return {"count": len(nodes), "dim": dim, "texts": saved_index.texts_digest(nodes)}

    def _saved_text_index(self, snap: Snapshot, dim: int) -> CosineIndex | None:
        """The index saved at the last close when it holds exactly these memories (a digest of their
        texts, so another memory under the same robot id never matches); None = rebuild."""
        path = saved_index.matching(self._index_base(), self._index_meta(snap.text_nodes, dim))
        if path is None:
            return None
        try:
            return CosineIndex.load(path, dim, [node.seq for node in snap.text_nodes], snap.text_vectors)
        except (RuntimeError, ValueError, OSError):  # a damaged file: rebuilt from Milvus
            return None

    def search_text(self, vector: np.ndarray, top_k: int, robot_id: str = "") -> list[dict]:
        """Memories of the whole fleet (or of robot_id) closest to vector, searched in Milvus with the
        configured search parameters: [{robot_id, node_id, kind, text, clip_index, start_ns, end_ns, score}]."""
        params = {"metric_type": "COSINE", "params": json.loads(self.config.search_params or "{}")}
        fields = ["robot_id", *TEXT_FIELDS[:7]]
        try:
            self._check_reachable()
            found = self.client.search(
                self.text_name, data=[np.asarray(vector, dtype=np.float32).tolist()], limit=top_k,
                filter=f'robot_id == "{robot_id}"' if robot_id else "", output_fields=fields, search_params=params,
                timeout=int(self.config.timeout_s),
            )  # fmt: skip
        except self._errors as error:
            raise StoreError(f"Milvus at {self.config.uri} is unavailable: {error}") from error
        return [{**{f: hit["entity"][f] for f in fields}, "score": float(hit["distance"])} for hit in found[0]]

    def get_meta(self, key: str) -> str | None:
        return self._meta_pending.get(key, self._meta.get(key))

    def counters(self) -> dict[str, int]:
        return dict(self._counters)

    def entity_crop(self, entity_id: str) -> bytes:
        """The face's best crop; empty while the server is away (get_entity answers without it)."""
        if not self.reachable():
            return b""
        try:
            found = list(self._iterate(self.records_name, f'key == "{self.key("crop", entity_id)}"', ["data"]))
        except self._errors:
            return b""
        return base64.b64decode(found[0]["data"]["jpeg"]) if found else b""

    def clip_path(self, clip_index: int) -> list[PoseSample]:
        """A clip's path; StoreError while the server is away."""
        try:
            self._check_reachable()
            found = list(self._iterate(self.records_name, f'key == "{self.key("path", str(clip_index))}"', ["data"]))
        except self._errors as error:
            raise StoreError(f"Milvus at {self.config.uri} is unavailable: {error}") from error
        return [PoseSample(**sample) for sample in found[0]["data"]["samples"]] if found else []

    @property
    def schema_version(self) -> int:
        return 1

    def disk_bytes(self) -> int:
        return 0  # held by the Milvus server

    def save_text_index(self, index: CosineIndex, nodes: list[TextNode]) -> bool:
        """Kept on this machine (on close): the next open loads it instead of rebuilding it."""
        return saved_index.save(self._index_base(), index, self._index_meta(nodes, index.dim))

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
                self.make_durable([payload])  # a clip counts as stored only once Milvus has persisted it
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
