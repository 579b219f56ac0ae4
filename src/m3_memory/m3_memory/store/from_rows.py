"""Building a new store from rows: an export being imported, or what a damaged store still holds.

The store is built in a hidden directory beside the target and renamed into place only when it is
complete, so a refused or failed import or repair leaves nothing behind, and no existing store is
ever written over.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from m3_memory.errors import StoreError
from m3_memory.graph.tags import ID_RE
from m3_memory.store.check import counts
from m3_memory.store.sqlite_store import MemoryStore

DEFAULT_TEXT_DIM = 384  # any value opens a store that has never held a text memory


@contextmanager
def new_store_dir(target: str) -> Iterator[str]:
    """A fresh directory to build a store in, renamed to `target` when the block succeeds and
    removed (with any parent it had to create) when it fails. target: missing or an empty directory."""
    target = os.path.abspath(os.path.expanduser(target))
    if os.path.lexists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise StoreError(f"{target} already exists and is not an empty directory; name a new one (nothing was written)")
    created: list[str] = []
    parent = os.path.dirname(target)
    while not os.path.isdir(parent):
        created.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        work = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.", suffix=".building", dir=os.path.dirname(target))
    except OSError as error:
        raise StoreError(f"cannot create {target}: {error}") from error
    try:
        yield work
        try:
            os.rename(work, target)  # onto a missing or an empty directory, atomically
        except OSError as error:
            raise StoreError(f"cannot move the new store into {target}: {error}") from error
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for path in created:  # deepest first
            try:
                os.rmdir(path)
            except OSError:
                break
        raise


def columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, bool]]:
    """(name, declared type, NOT NULL) of each column of one of our tables."""
    return [(row[1], row[2].upper(), bool(row[3])) for row in conn.execute(f"PRAGMA table_info({table})")]


def insert_rows(conn: sqlite3.Connection, table: str, names: list[str], rows: Iterable[tuple], conflict: str) -> int:
    """Insert rows (conflict: '', 'OR IGNORE' or 'OR REPLACE'); returns how many were written."""
    before = conn.total_changes
    conn.executemany(f"INSERT {conflict} INTO {table}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", rows)
    return conn.total_changes - before


_ORPHANS = {  # in this order: a text node that goes takes its node_clips and edges with it
    "text_nodes": "DELETE FROM text_nodes WHERE clip_index NOT IN (SELECT clip_index FROM clips)",
    "node_clips": "DELETE FROM node_clips WHERE node_id NOT IN (SELECT node_id FROM text_nodes) "
    "OR clip_index NOT IN (SELECT clip_index FROM clips)",
    "edges": "DELETE FROM edges WHERE node_id NOT IN (SELECT node_id FROM text_nodes)",
    "text_places": "DELETE FROM text_places WHERE node_id NOT IN (SELECT node_id FROM text_nodes)",
    "validity": "DELETE FROM validity WHERE node_id NOT IN (SELECT node_id FROM text_nodes)",
    "clip_paths": "DELETE FROM clip_paths WHERE clip_index NOT IN (SELECT clip_index FROM clips)",
    "sightings": "DELETE FROM sightings WHERE clip_index NOT IN (SELECT clip_index FROM clips)",
    "entity_embeddings": "DELETE FROM entity_embeddings WHERE entity_id NOT IN (SELECT entity_id FROM entities)",
}


def drop_orphans(conn: sqlite3.Connection) -> dict[str, int]:
    """Delete rows whose parent row is gone (the foreign keys and the graph's loader require it)."""
    removed = {}
    for table, sql in _ORPHANS.items():
        if count := conn.execute(sql).rowcount:
            removed[table] = count
    return removed


def raise_counters(conn: sqlite3.Connection) -> None:
    """Id counters at least the highest id in use, merged ids included, so no new id repeats one."""
    top = {name: int(value) for name, value in conn.execute("SELECT name, value FROM counters")}

    def bump(name: str, value: int | None) -> None:
        if value is not None and value > top.get(name, 0):
            top[name] = value

    for kind, seq in conn.execute("SELECT kind, max(seq) FROM entities GROUP BY kind").fetchall():
        bump(kind, seq)
    for (old_id,) in conn.execute("SELECT old_id FROM aliases").fetchall():
        if match := ID_RE.match(old_id):
            bump(match.group(1), int(match.group(2)))
    bump("text", conn.execute("SELECT max(seq) FROM text_nodes").fetchone()[0])
    conn.executemany("INSERT OR REPLACE INTO counters(name, value) VALUES (?, ?)", sorted(top.items()))


def open_and_count(memory_dir: str) -> dict:
    """Open a store as the memory does (quick_check, then the whole graph load) and count it."""
    from m3_memory.graph.memory_graph import MemoryGraph

    store = MemoryStore(memory_dir, create=False)
    try:
        MemoryGraph(store, int(store.get_meta("text_dim") or DEFAULT_TEXT_DIM))
        return counts(store.conn())
    finally:
        store.close()
