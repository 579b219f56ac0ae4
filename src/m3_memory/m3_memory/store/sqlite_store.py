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
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from m3_memory.errors import SchemaVersionError, StoreError
from m3_memory.store.check import integrity_problems, one_line
from m3_memory.store.schema import DDL, SCHEMA_VERSION, TABLES, V2_DDL, V2_TABLES, V3_UPGRADE

FORMAT_NAME = "m3_memory"
DB_FILE = "memory.sqlite3"
SCHEMA_FILE = "schema.json"
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def vector_to_blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def blob_to_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


class MemoryStore:
    """SQLite access: one connection per thread (WAL lets searches read while a clip is written).

    Only a memory directory without memory.sqlite3 is made into a new store; an existing file is
    opened only when it is one of ours: a zero-length file, a file that is not SQLite, an SQLite
    file without our meta table, a newer schema or pages that fail `PRAGMA quick_check` are a
    StoreError (SchemaVersionError) that names the file, and the file is left exactly as it was.
    """

    def __init__(self, memory_dir: str, create: bool = True, readonly: bool = False, verify: bool = True) -> None:
        """create: make a new store when the directory has none; readonly: open without writing
        anything (check, export, stats); verify: run quick_check (about 0.1 s per 200 MB) and refuse a
        damaged store (the check tool turns it off to report every problem instead)."""
        self.memory_dir = os.path.abspath(os.path.expanduser(memory_dir))
        self.db_path = os.path.join(self.memory_dir, DB_FILE)
        self.readonly = readonly
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._conn_lock = threading.Lock()
        self._check_schema_file()
        if os.path.lexists(self.db_path):
            self._check_file()
        elif not create or readonly:
            raise StoreError(f"no memory store at {self.db_path}")
        elif os.path.isfile(os.path.join(self.memory_dir, SCHEMA_FILE)):
            raise StoreError(
                f"{self.memory_dir} has {SCHEMA_FILE} but no {DB_FILE}: the memory's database is missing. Restore "
                "it from a backup or choose another memory directory (nothing was created)"
            )
        else:
            self._create()
        # Checked through a read-only connection first: a read-write one would switch a foreign
        # database to WAL mode (a write) before it was known not to be ours.
        probe = self._connect(readonly=True)
        try:
            self._check_contents(probe, verify)
        except sqlite3.DatabaseError as error:
            raise self._damaged(f"is damaged: SQLite cannot read it ({error})") from error
        finally:
            probe.close()
        if not readonly:
            self._upgrade(self.conn())
            self._write_schema_file()

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """Bring an older schema up to SCHEMA_VERSION in one transaction (1 -> 2: add V2_TABLES, which start
        empty: memories stored before had no pose, and none was superseded; 2 -> 3: the entities table
        takes object and text entities and a label, its rows kept)."""
        version = self.schema_version
        if version >= SCHEMA_VERSION:
            return
        steps = (V2_DDL if version < 2 else "") + V3_UPGRADE
        with self._write_lock:
            conn.execute("PRAGMA foreign_keys=OFF")  # no-op inside a transaction: set before it begins
            try:
                conn.executescript(
                    "BEGIN IMMEDIATE;" + steps + f"UPDATE meta SET value='{SCHEMA_VERSION}' WHERE key='schema_version';"
                    "COMMIT;"
                )
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")  # the store stays as it was, at its old version
                raise
            finally:
                conn.execute("PRAGMA foreign_keys=ON")
        self._write_schema_file(replace=True)

    @property
    def has_places(self) -> bool:
        """Whether the store has V2_TABLES (a version-1 store opened read-only has not)."""
        return self.schema_version >= 2

    # -- opening ----------------------------------------------------------------------------------
    def _check_file(self) -> None:
        """Refuse before SQLite sees it: a directory, an empty file or one that is not SQLite."""
        try:
            with open(self.db_path, "rb") as handle:
                head = handle.read(len(SQLITE_MAGIC))
        except OSError as error:
            raise StoreError(f"memory store {self.db_path} is unreadable: {error}") from error
        if not head:
            raise StoreError(
                f"memory store {self.db_path} is empty (0 bytes): it was truncated or never written, so it is not "
                "opened as a new memory. Restore it from a backup, or move it away to start a new memory"
            )
        if head != SQLITE_MAGIC:
            raise StoreError(
                f"memory store {self.db_path} is unreadable: not an SQLite database (it starts with {head!r}); "
                "restore it from a backup or choose another memory directory (the file is left as it is)"
            )

    def _create(self) -> None:
        """A new store, built under a temporary name and linked into place complete: a crash never
        leaves a half-made memory.sqlite3, and a store another process made meanwhile is kept."""
        try:
            os.makedirs(self.memory_dir, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{DB_FILE}.", suffix=".new", dir=self.memory_dir)
            os.close(fd)
        except OSError as error:
            raise StoreError(f"cannot create memory store in {self.memory_dir}: {error}") from error
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript("BEGIN IMMEDIATE;" + DDL + "COMMIT;")
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', ?), ('format', ?), ('created_ns', ?)",
                    (str(SCHEMA_VERSION), FORMAT_NAME, str(time.time_ns())),
                )
            finally:
                conn.close()
            try:
                os.link(tmp, self.db_path)
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                if not os.path.exists(self.db_path):
                    os.rename(tmp, self.db_path)
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"cannot create memory store {self.db_path}: {error}") from error
        finally:
            for path in (tmp, tmp + "-wal", tmp + "-shm"):
                if os.path.exists(path):
                    os.remove(path)

    def _damaged(self, detail: str) -> StoreError:
        return StoreError(
            f"memory store {self.db_path} {detail}; it is left untouched: `m3 memory check {self.memory_dir}` lists "
            f"the problems and `m3 memory check {self.memory_dir} --repair NEW_DIR` salvages what SQLite can still "
            "read into a new store"
        )

    def _check_contents(self, conn: sqlite3.Connection, verify: bool) -> None:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" not in tables:
            raise StoreError(
                f"{self.db_path} is an SQLite database but not a memory store (no meta table; tables: "
                f"{sorted(tables) or 'none'}); choose another memory directory (the file is left as it is)"
            )
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('format', 'schema_version')"))
        if meta.get("format") != FORMAT_NAME:
            raise StoreError(
                f"{self.db_path} is an SQLite database of format {meta.get('format')!r}, not a memory store "
                f"({FORMAT_NAME!r}); choose another memory directory (the file is left as it is)"
            )
        try:
            version = int(meta["schema_version"])
        except (KeyError, ValueError) as error:
            raise self._damaged("has no valid schema version") from error
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"memory store {self.db_path} has schema version {version}, newer than this program's "
                f"{SCHEMA_VERSION}; upgrade m3_memory (the store is left untouched)"
            )
        missing = sorted(set(TABLES) - tables - (set(V2_TABLES) if version < 2 else set()))
        if missing:
            raise self._damaged(f"lacks the table(s) {missing}")
        if verify:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(10)") if row[0] != "ok"]
            if problems:
                raise self._damaged(f"is damaged: {'; '.join(one_line(p) for p in problems)}")

    # -- schema.json ------------------------------------------------------------------------------
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

    def _write_schema_file(self, replace: bool = False) -> None:
        """schema.json, written once (again when the schema was upgraded: replace)."""
        path = os.path.join(self.memory_dir, SCHEMA_FILE)
        if os.path.isfile(path) and not replace:
            return
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump({"format": FORMAT_NAME, "schema_version": SCHEMA_VERSION, "database": DB_FILE}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    @property
    def schema_version(self) -> int:
        return int(self.conn().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])

    # -- connections ----------------------------------------------------------------------------
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (sqlite3 connections must not be shared across threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect(self.readonly)
            self._local.conn = conn
            with self._conn_lock:
                self._connections.append(conn)
        return conn

    def _connect(self, readonly: bool) -> sqlite3.Connection:
        try:
            if readonly:  # mode=ro: SQLite writes nothing to the store (it may add an empty -wal/-shm)
                uri = f"file:{urllib.parse.quote(self.db_path)}?mode=ro"
                return sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            return conn
        except sqlite3.DatabaseError as error:
            raise StoreError(f"memory store {self.db_path} is unreadable: {error}") from error

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
        """Problems found (empty list = healthy); see m3_memory.store.check.integrity_problems."""
        return integrity_problems(self.conn())

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
            "counters": dict(conn.execute("SELECT name, value FROM counters").fetchall()),
            "clips": rows("SELECT * FROM clips ORDER BY clip_index"),
            "text_nodes": rows("SELECT * FROM text_nodes ORDER BY seq"),
            "node_clips": rows("SELECT * FROM node_clips ORDER BY rowid"),  # the order the graph loads
            "entities": rows("SELECT * FROM entities ORDER BY kind, seq"),
            "aliases": rows("SELECT * FROM aliases ORDER BY old_id"),
            "edges": rows("SELECT * FROM edges ORDER BY rowid"),
            "evidence": rows("SELECT * FROM evidence ORDER BY id1, id2"),
            "text_places": rows("SELECT * FROM text_places ORDER BY node_id") if self.has_places else [],
            "clip_paths": rows("SELECT * FROM clip_paths ORDER BY clip_index, stamp_ns") if self.has_places else [],
            "sightings": rows("SELECT * FROM sightings ORDER BY clip_index, entity_id") if self.has_places else [],
            "validity": rows("SELECT * FROM validity ORDER BY node_id") if self.has_places else [],
        }
        if include_embeddings:
            data["entity_embeddings"] = rows("SELECT * FROM entity_embeddings ORDER BY entity_id, slot")
        return data
