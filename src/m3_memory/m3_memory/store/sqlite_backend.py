"""The embedded default back-end: the SQLite WAL store (m3_memory.store.sqlite_store) plus the saved hnswlib text index.

One clip is one SQLite transaction (synchronous=FULL), so a clip reported stored survives kill -9;
the text index is saved beside the store on close and reused only when it matches the store exactly.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import astuple

import numpy as np

from m3_memory.errors import StoreError
from m3_memory.graph.backend import Snapshot
from m3_memory.graph.records import EntityRecord, Place, Sighting, TextNode
from m3_memory.place.poses import PoseSample
from m3_memory.store import saved_index
from m3_memory.store.ann_index import CosineIndex
from m3_memory.store.sqlite_store import MemoryStore, blob_to_vector, vector_to_blob


class SqliteWriter:
    """StoreWriter over one open SQLite transaction."""

    def __init__(self, store: MemoryStore, conn: sqlite3.Connection) -> None:
        self.store, self.conn = store, conn

    def ensure_text_dim(self, dim: int) -> None:
        if self.store.get_meta("text_dim") is None:
            self.conn.execute("INSERT INTO meta(key, value) VALUES ('text_dim', ?)", (str(dim),))

    def next_id(self, kind: str) -> int:
        return self.store.next_counter(self.conn, kind)

    def set_counter(self, kind: str, value: int) -> None:
        self.conn.execute("INSERT OR REPLACE INTO counters(name, value) VALUES (?, ?)", (kind, value))

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def add_clip(self, clip_index: int, start_ns: int, end_ns: int, stored_ns: int, keyframe_jpeg: bytes) -> None:
        self.conn.execute(
            "INSERT INTO clips(clip_index, start_ns, end_ns, stored_ns, keyframe_jpeg) VALUES (?, ?, ?, ?, ?)",
            (clip_index, start_ns, end_ns, stored_ns, keyframe_jpeg or None),
        )

    def add_clips(self, rows: list[tuple[int, int, int, int, list[str], bytes]]) -> None:
        self.conn.executemany(
            "INSERT INTO clips(clip_index, start_ns, end_ns, stored_ns, entity_ids, keyframe_jpeg)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(i, start, end, stored, json.dumps(ids), jpeg or None) for i, start, end, stored, ids, jpeg in rows],
        )

    def set_clip_entities(self, clip_index: int, entity_ids: list[str]) -> None:
        self.conn.execute("UPDATE clips SET entity_ids=? WHERE clip_index=?", (json.dumps(entity_ids), clip_index))

    def add_entity(self, record: EntityRecord) -> None:
        self.conn.execute(
            "INSERT INTO entities(entity_id, seq, kind, person_id, first_clip, last_clip) VALUES (?, ?, ?, ?, ?, ?)",
            (record.entity_id, record.seq, record.kind, record.person_id, record.first_clip, record.last_clip),
        )

    def save_entity(self, record: EntityRecord) -> None:
        self.conn.execute(
            "UPDATE entities SET name=?, person_id=?, observation_count=?, first_clip=?, last_clip=?, first_ns=?,"
            " last_ns=?, name_votes=?, label=? WHERE entity_id=?",
            (
                record.name, record.person_id, record.observation_count, record.first_clip, record.last_clip,
                record.first_ns, record.last_ns, json.dumps(record.name_votes, sort_keys=True), record.label,
                record.entity_id,
            ),
        )  # fmt: skip

    def set_crop(self, entity_id: str, score: float, jpeg: bytes) -> None:
        self.conn.execute("UPDATE entities SET crop_score=?, crop_jpeg=? WHERE entity_id=?", (score, jpeg, entity_id))

    def set_samples(self, entity_id: str, samples: list[np.ndarray]) -> None:
        self.conn.execute("DELETE FROM entity_embeddings WHERE entity_id=?", (entity_id,))
        self.conn.executemany(
            "INSERT INTO entity_embeddings(entity_id, slot, embedding) VALUES (?, ?, ?)",
            [(entity_id, slot, vector_to_blob(v)) for slot, v in enumerate(samples)],
        )

    def put_match(self, id1: str, id2: str, confidence: float, count: int, clip_index: int, stamp_ns: int) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO evidence(id1, id2, kind, confidence, evidence_count, clip_index, stamp_ns)"
            " VALUES (?, ?, 'match', ?, ?, ?, ?)",
            (id1, id2, confidence, count, clip_index, stamp_ns),
        )

    def merge_person(self, gone: str, keep: str, clip_index: int, aliases: list[str], members: list[EntityRecord]):
        self.conn.execute("DELETE FROM entities WHERE entity_id=?", (gone,))
        self.conn.execute(
            "INSERT OR REPLACE INTO aliases(old_id, new_id, clip_index, reason) VALUES (?, ?, ?, 'equivalence')",
            (gone, keep, clip_index),
        )
        self.conn.execute("UPDATE aliases SET new_id=? WHERE new_id=?", (keep, gone))
        self.conn.execute("UPDATE entities SET person_id=? WHERE person_id=?", (keep, gone))

    def add_text_nodes(self, nodes: list[TextNode], vectors: np.ndarray) -> None:
        self.conn.executemany(
            "INSERT INTO text_nodes(node_id, seq, kind, text, clip_index, start_ns, end_ns, weight, embedding)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (n.node_id, n.seq, n.kind, n.text, n.clip_index, n.start_ns, n.end_ns, n.weight, vector_to_blob(v))
                for n, v in zip(nodes, vectors, strict=True)
            ],
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO edges(node_id, entity_id) VALUES (?, ?)",
            [(n.node_id, e) for n in nodes for e in n.entity_ids],
        )
        self.conn.executemany(
            "INSERT INTO text_places(node_id, frame_id, x, y, yaw, region) VALUES (?, ?, ?, ?, ?, ?)",
            [(n.node_id, *astuple(n.place)) for n in nodes if n.place is not None],
        )

    def set_validity(self, node: TextNode) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO validity(node_id, valid_until_ns, superseded_by) VALUES (?, ?, ?)",
            (node.node_id, node.valid_until_ns, node.superseded_by),
        )

    def add_sighting(self, sighting: Sighting) -> None:
        place = astuple(sighting.place) if sighting.place is not None else (None,) * 5
        self.conn.execute(
            "INSERT OR REPLACE INTO sightings(entity_id, clip_index, first_ns, last_ns, frame_id, x, y, yaw, region)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (sighting.entity_id, sighting.clip_index, sighting.first_ns, sighting.last_ns, *place),
        )

    def add_clip_path(self, clip_index: int, path: list[PoseSample]) -> None:
        self.conn.executemany(
            "INSERT INTO clip_paths(clip_index, stamp_ns, frame_id, x, y, yaw) VALUES (?, ?, ?, ?, ?, ?)",
            [(clip_index, p.stamp_ns, p.frame_id, p.x, p.y, p.yaw) for p in path],
        )

    def set_weight(self, node: TextNode) -> None:
        self.conn.execute("UPDATE text_nodes SET weight=? WHERE node_id=?", (node.weight, node.node_id))

    def add_node_clip(self, node_id: str, clip_index: int, delta: float) -> None:
        self.conn.execute(
            "INSERT INTO node_clips(node_id, clip_index, delta) VALUES (?, ?, ?)"
            " ON CONFLICT(node_id, clip_index) DO UPDATE SET delta = delta + excluded.delta",
            (node_id, clip_index, delta),
        )


class SqliteBackend:
    """MemoryBackend over a MemoryStore (a memory directory)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.location = store.memory_dir

    # -- reading ----------------------------------------------------------------------------------
    def load(self, text_dim: int) -> Snapshot:
        stored_dim = self.store.get_meta("text_dim")
        if stored_dim is not None and int(stored_dim) != text_dim:
            raise ValueError(f"store holds {stored_dim}-d text embeddings; the embedder gives {text_dim}-d")
        try:
            return self._load(text_dim)
        except StoreError:
            raise
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as error:
            # Rows SQLite still reads can hold flipped bytes (bad JSON, a clip that is gone): the store is
            # damaged, which the node reports as STORE_UNAVAILABLE rather than dying.
            raise StoreError(
                f"memory store {self.store.db_path} is damaged: reading it failed ({type(error).__name__}: {error}); "
                f"`m3 memory check {self.store.memory_dir}` lists the problems and `--repair NEW_DIR` salvages the rest"
            ) from error

    def _load(self, text_dim: int) -> Snapshot:
        conn = self.store.conn()
        snap = Snapshot()
        for idx, start, end, stored, ids in conn.execute(
            "SELECT clip_index, start_ns, end_ns, stored_ns, entity_ids FROM clips"
        ):
            snap.clips.append((idx, start, end, stored, json.loads(ids)))
        edges: dict[str, list[str]] = {}
        for node_id, entity_id in conn.execute("SELECT node_id, entity_id FROM edges ORDER BY rowid"):
            edges.setdefault(node_id, []).append(entity_id)
        saved = self._saved_text_index(conn, text_dim)
        places, validity = {}, {}
        if self.store.has_places:
            for node_id, *place in conn.execute("SELECT node_id, frame_id, x, y, yaw, region FROM text_places"):
                places[node_id] = Place(*place)
            validity = {row[0]: row[1:] for row in conn.execute("SELECT * FROM validity")}
        for row in conn.execute(
            "SELECT node_id, seq, kind, text, clip_index, start_ns, end_ns, weight FROM text_nodes ORDER BY seq"
        ):
            until, by = validity.get(row[0], (0, ""))
            snap.text_nodes.append(
                TextNode(*row, edges.get(row[0], []), places.get(row[0]), valid_until_ns=until, superseded_by=by)
            )
        snap.text_vectors = self._text_vectors(conn, len(snap.text_nodes), text_dim)
        if saved is not None:
            labels = [node.seq for node in snap.text_nodes]
            snap.text_index = CosineIndex.load(saved, text_dim, labels, snap.text_vectors)
        if self.store.has_places:
            for entity_id, clip_index, first, last, *place in conn.execute(
                "SELECT entity_id, clip_index, first_ns, last_ns, frame_id, x, y, yaw, region FROM sightings"
                " ORDER BY clip_index, entity_id"
            ):
                where = Place(*place) if place[0] is not None else None
                snap.sightings.append(Sighting(entity_id, clip_index, first, last, where))
        reinforced = "SELECT node_id, clip_index FROM node_clips WHERE delta > 0 ORDER BY rowid"
        snap.node_clips = list(conn.execute(reinforced))
        label = "label" if self.store.schema_version >= 3 else "''"  # a store opened read-only is not upgraded
        for row in conn.execute(
            "SELECT entity_id, seq, kind, name, person_id, observation_count, first_clip, last_clip, first_ns,"
            f" last_ns, crop_score, name_votes, {label} FROM entities"
        ):
            snap.entities.append(EntityRecord(*row[:11], name_votes=json.loads(row[11]), label=row[12]))
        for old, new, clip_index in conn.execute("SELECT old_id, new_id, clip_index FROM aliases"):
            snap.aliases[old], snap.alias_clips[old] = new, clip_index
        for entity_id, blob in conn.execute(
            "SELECT entity_id, embedding FROM entity_embeddings ORDER BY entity_id, slot"
        ):
            snap.entity_samples.setdefault(entity_id, []).append(blob_to_vector(blob))
        for id1, id2, confidence, count, clip_index, stamp in conn.execute(
            "SELECT id1, id2, confidence, evidence_count, clip_index, stamp_ns FROM evidence WHERE kind='match'"
        ):
            snap.evidence[(id1, id2)] = (confidence, count)
            snap.evidence_at[(id1, id2)] = (clip_index, stamp)
        snap.node_clip_deltas = list(conn.execute("SELECT node_id, clip_index, delta FROM node_clips ORDER BY rowid"))
        snap.counters = dict(conn.execute("SELECT name, value FROM counters"))
        snap.meta = dict(conn.execute("SELECT key, value FROM meta"))
        return snap

    def _text_vectors(self, conn, count: int, dim: int) -> np.ndarray:
        """The text embeddings in seq order, in one block with room to grow (the text index adopts it
        when it loads its saved graph), read in chunks: per-row numpy work doubled a 1M open."""
        vectors = np.zeros((count + 1024, dim), dtype=np.float32)
        size, filled = 4 * dim, 0
        cursor = conn.execute("SELECT node_id, embedding FROM text_nodes ORDER BY seq")
        while rows := cursor.fetchmany(8192):
            data = b"".join(blob for _, blob in rows)
            if len(data) != size * len(rows):
                node_id, blob = next((n, b) for n, b in rows if len(b) != size)
                raise StoreError(
                    f"text node {node_id}: embedding of {len(blob)} bytes, not {size} (text_dim "
                    f"{dim}): the store is damaged (m3 memory check lists what)"
                )
            vectors[filled : filled + len(rows)] = np.frombuffer(data, dtype="<f4").reshape(len(rows), -1)
            filled += len(rows)
        if filled != count:
            raise StoreError(f"text nodes changed while the memory opened ({count} then {filled})")
        return vectors

    def _saved_text_index(self, conn, dim: int) -> str | None:
        """The saved text index when it matches the store exactly (text nodes are only ever added,
        so equal count and highest seq mean equal contents); None means rebuild from the store."""
        count, top = conn.execute("SELECT count(*), coalesce(max(seq), 0) FROM text_nodes").fetchone()
        return saved_index.matching(self._index_base(), {"count": count, "max_seq": top, "dim": dim})

    def _index_base(self) -> str:
        return os.path.join(self.store.memory_dir, "text_index")

    def save_text_index(self, index: CosineIndex, nodes: list[TextNode]) -> bool:
        """Save the text index next to the store (on close) so large memories open fast."""
        meta = {"count": len(nodes), "max_seq": nodes[-1].seq if nodes else 0, "dim": index.dim}
        return saved_index.save(self._index_base(), index, meta)

    def get_meta(self, key: str) -> str | None:
        return self.store.get_meta(key)

    def counters(self) -> dict[str, int]:
        return dict(self.store.conn().execute("SELECT name, value FROM counters").fetchall())

    def entity_number(self, counter: int) -> int:
        return counter

    def flush_pending(self) -> int:
        return 0  # every clip is in the store when its transaction ends

    def people(self) -> None:
        return None  # one robot's own store: nothing to take in

    def clip_path(self, clip_index: int) -> list[PoseSample]:
        if not self.store.has_places:
            return []
        rows = self.store.conn().execute(
            "SELECT stamp_ns, x, y, yaw, frame_id FROM clip_paths WHERE clip_index=? ORDER BY stamp_ns", (clip_index,)
        )
        return [PoseSample(*row) for row in rows]

    def entity_crop(self, entity_id: str) -> bytes:
        return self.store.entity_crop(entity_id)

    @property
    def schema_version(self) -> int:
        return self.store.schema_version

    def disk_bytes(self) -> int:
        return self.store.disk_bytes()

    # -- writing ----------------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[SqliteWriter]:
        with self.store.transaction() as conn:
            yield SqliteWriter(self.store, conn)

    def close(self) -> None:
        self.store.close()
