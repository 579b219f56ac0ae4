"""Durable memory store: SQLite in WAL mode inside a memory directory.

Layout: <memory_dir>/memory.sqlite3 (all data) and <memory_dir>/schema.json (format and schema
version, written once). A clip and everything derived from it is written in one transaction, so a
reader never sees half a clip and a clip reported stored survives kill -9 (synchronous=FULL).
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from m3_memory.errors import SchemaVersionError, StoreError

SCHEMA_VERSION = 1
FORMAT_NAME = "m3_memory"
DB_FILE = "memory.sqlite3"
SCHEMA_FILE = "schema.json"

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS clips (
    clip_index INTEGER PRIMARY KEY, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
    stored_ns INTEGER NOT NULL, entity_ids TEXT NOT NULL DEFAULT '[]', keyframe_jpeg BLOB);
CREATE TABLE IF NOT EXISTS text_nodes (
    node_id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, kind TEXT NOT NULL CHECK (kind IN ('episodic','semantic')),
    text TEXT NOT NULL, clip_index INTEGER NOT NULL REFERENCES clips(clip_index),
    start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, weight REAL NOT NULL, embedding BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS node_clips (
    node_id TEXT NOT NULL REFERENCES text_nodes(node_id), clip_index INTEGER NOT NULL REFERENCES clips(clip_index),
    delta REAL NOT NULL, PRIMARY KEY (node_id, clip_index));
CREATE TABLE IF NOT EXISTS entities (
    entity_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('face','voice','person')),
    name TEXT NOT NULL DEFAULT '', person_id TEXT NOT NULL DEFAULT '', observation_count INTEGER NOT NULL DEFAULT 0,
    first_clip INTEGER NOT NULL DEFAULT -1, last_clip INTEGER NOT NULL DEFAULT -1,
    first_ns INTEGER NOT NULL DEFAULT 0, last_ns INTEGER NOT NULL DEFAULT 0,
    name_votes TEXT NOT NULL DEFAULT '{}', crop_score REAL NOT NULL DEFAULT -1, crop_jpeg BLOB, UNIQUE (kind, seq));
CREATE TABLE IF NOT EXISTS entity_embeddings (
    entity_id TEXT NOT NULL REFERENCES entities(entity_id), slot INTEGER NOT NULL, embedding BLOB NOT NULL,
    PRIMARY KEY (entity_id, slot));
CREATE TABLE IF NOT EXISTS aliases (
    old_id TEXT PRIMARY KEY, new_id TEXT NOT NULL, clip_index INTEGER NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS edges (
    node_id TEXT NOT NULL REFERENCES text_nodes(node_id), entity_id TEXT NOT NULL,
    PRIMARY KEY (node_id, entity_id));
CREATE TABLE IF NOT EXISTS evidence (
    id1 TEXT NOT NULL, id2 TEXT NOT NULL, kind TEXT NOT NULL, confidence REAL NOT NULL,
    evidence_count INTEGER NOT NULL, clip_index INTEGER NOT NULL, stamp_ns INTEGER NOT NULL,
    PRIMARY KEY (id1, id2, kind));
CREATE INDEX IF NOT EXISTS text_nodes_clip ON text_nodes(clip_index);
CREATE INDEX IF NOT EXISTS edges_entity ON edges(entity_id);
"""


def vector_to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def blob_to_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


class MemoryStore:
    """SQLite access: one connection per thread (WAL lets searches read while a clip is written)."""

    def __init__(self, memory_dir: str, create: bool = True) -> None:
        self.memory_dir = os.path.abspath(os.path.expanduser(memory_dir))
        self.db_path = os.path.join(self.memory_dir, DB_FILE)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._conn_lock = threading.Lock()
        exists = os.path.isfile(self.db_path)
        if not exists and not create:
            raise StoreError(f"no memory store at {self.db_path}")
        try:
            os.makedirs(self.memory_dir, exist_ok=True)
        except OSError as error:
            raise StoreError(f"cannot create memory directory {self.memory_dir}: {error}") from error
        self._check_schema_file()
        try:
            conn = self.conn()
            with self._write_lock:
                current = self._stored_version(conn)
                if current is not None and current > SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"memory store {self.db_path} has schema version {current}, newer than this program's "
                        f"{SCHEMA_VERSION}; upgrade m3_memory (the store is left untouched)"
                    )
                if current is None:
                    conn.executescript("BEGIN IMMEDIATE;" + _DDL + "COMMIT;")
                    conn.execute(
                        "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?), ('format', ?),"
                        " ('created_ns', ?)",
                        (str(SCHEMA_VERSION), FORMAT_NAME, str(time.time_ns())),
                    )
                    conn.commit()
        except sqlite3.DatabaseError as error:
            raise StoreError(f"memory store {self.db_path} is unreadable: {error}") from error
        self._write_schema_file()

    # -- schema ---------------------------------------------------------------------------------
    def _check_schema_file(self) -> None:
        path = os.path.join(self.memory_dir, SCHEMA_FILE)
        if not os.path.isfile(path):
            return
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            version = int(data["schema_version"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StoreError(f"unreadable {path}: {error}") from error
        if data.get("format", FORMAT_NAME) != FORMAT_NAME:
            raise StoreError(f"{path} describes format {data.get('format')!r}, not {FORMAT_NAME!r}")
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"memory store {self.memory_dir} has schema version {version}, newer than this program's "
                f"{SCHEMA_VERSION}; upgrade m3_memory (the store is left untouched)"
            )

    def _write_schema_file(self) -> None:
        path = os.path.join(self.memory_dir, SCHEMA_FILE)
        if os.path.isfile(path):
            return
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"format": FORMAT_NAME, "schema_version": SCHEMA_VERSION, "database": DB_FILE}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    @staticmethod
    def _stored_version(conn: sqlite3.Connection) -> int | None:
        row = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if row is None:
            return None
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return None if row is None else int(row[0])

    @property
    def schema_version(self) -> int:
        return int(self.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])

    # -- connections ----------------------------------------------------------------------------
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections must not be shared across threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.DatabaseError as error:
                raise StoreError(f"memory store {self.db_path} is unreadable: {error}") from error
            self._local.conn = conn
            with self._conn_lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write; commits (durably) on success, rolls back on any error."""
        conn = self.conn()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        with self._conn_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
        self._local = threading.local()

    # -- queries --------------------------------------------------------------------------------
    def next_counter(self, conn: sqlite3.Connection, name: str) -> int:
        """Next value of a never-reused id counter (inside the caller's transaction)."""
        row = conn.execute("SELECT value FROM counters WHERE name=?", (name,)).fetchone()
        value = 1 if row is None else int(row[0]) + 1
        conn.execute("INSERT OR REPLACE INTO counters(name, value) VALUES (?, ?)", (name, value))
        return value

    def get_meta(self, key: str) -> str | None:
        row = self.conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def entity_crop(self, entity_id: str) -> bytes:
        row = self.conn().execute("SELECT crop_jpeg FROM entities WHERE entity_id=?", (entity_id,)).fetchone()
        return bytes(row[0]) if row and row[0] is not None else b""

    def disk_bytes(self) -> int:
        total = 0
        for name in os.listdir(self.memory_dir):
            path = os.path.join(self.memory_dir, name)
            if os.path.isfile(path):
                total += os.path.getsize(path)
        return total

    def integrity_check(self) -> list[str]:
        """Problems found (empty list = healthy): SQLite's own check plus the graph's references."""
        conn = self.conn()
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check") if row[0] != "ok"]
        problems += [
            f"foreign key violation in {row[0]} (rowid {row[1]})" for row in conn.execute("PRAGMA foreign_key_check")
        ]
        checks = {
            "edge to unknown entity": "SELECT node_id || ' -> ' || entity_id FROM edges WHERE entity_id NOT IN "
            "(SELECT entity_id FROM entities) AND entity_id NOT IN (SELECT old_id FROM aliases)",
            "alias to unknown entity": "SELECT old_id FROM aliases WHERE new_id NOT IN "
            "(SELECT entity_id FROM entities)",
            "face/voice without person": "SELECT entity_id FROM entities WHERE kind IN ('face','voice') AND "
            "person_id NOT IN (SELECT entity_id FROM entities WHERE kind='person')",
            "text node without clip": "SELECT node_id FROM text_nodes WHERE clip_index NOT IN "
            "(SELECT clip_index FROM clips)",
        }
        for label, sql in checks.items():
            problems += [f"{label}: {row[0]}" for row in conn.execute(sql)]
        dim = self.get_meta("text_dim")
        if dim is not None:
            for (node_id,) in conn.execute(
                "SELECT node_id FROM text_nodes WHERE length(embedding) != ?", (int(dim) * 4,)
            ):
                problems.append(f"text node {node_id}: embedding size does not match text_dim {dim}")
        for kind, prefix in (("face", "face_"), ("voice", "voice_"), ("person", "person_")):
            row = conn.execute("SELECT value FROM counters WHERE name=?", (kind,)).fetchone()
            top = conn.execute("SELECT max(seq) FROM entities WHERE kind=?", (kind,)).fetchone()[0]
            if top is not None and (row is None or int(row[0]) < int(top)):
                problems.append(f"counter {kind} is behind the highest {prefix} id {top}")
        return problems

    def export_json(self, include_embeddings: bool = False) -> dict:
        """Everything in the store as JSON-ready data (crops base64; embeddings only on request)."""
        conn = self.conn()

        def rows(sql: str) -> list[dict]:
            cursor = conn.execute(sql)
            names = [c[0] for c in cursor.description]
            out = []
            for values in cursor:
                item = {}
                for key, value in zip(names, values, strict=True):
                    if isinstance(value, bytes):
                        if key == "embedding":
                            if not include_embeddings:
                                continue
                            value = blob_to_vector(value).tolist()
                        else:
                            value = base64.b64encode(value).decode("ascii")
                    elif key in ("entity_ids", "name_votes"):
                        value = json.loads(value)
                    item[key] = value
                out.append(item)
            return out

        data = {
            "format": FORMAT_NAME,
            "schema_version": self.schema_version,
            "meta": dict(conn.execute("SELECT key, value FROM meta").fetchall()),
            "clips": rows("SELECT * FROM clips ORDER BY clip_index"),
            "text_nodes": rows("SELECT * FROM text_nodes ORDER BY seq"),
            "node_clips": rows("SELECT * FROM node_clips ORDER BY node_id, clip_index"),
            "entities": rows("SELECT * FROM entities ORDER BY kind, seq"),
            "aliases": rows("SELECT * FROM aliases ORDER BY old_id"),
            "edges": rows("SELECT * FROM edges ORDER BY node_id, entity_id"),
            "evidence": rows("SELECT * FROM evidence ORDER BY id1, id2"),
        }
        if include_embeddings:
            data["entity_embeddings"] = rows("SELECT * FROM entity_embeddings ORDER BY entity_id, slot")
        return data
