"""Damaged and foreign files where a store should be: refused with a StoreError naming the file,
never re-initialised or written to; only a directory without memory.sqlite3 gets a new store."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pytest
from store_damage import build_store, digest, flip_leaf

from m3_memory.errors import StoreError
from m3_memory.memory import Memory
from m3_memory.store.sqlite_store import DB_FILE, SCHEMA_FILE, MemoryStore


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder) -> str:
    """One healthy store made by the memory; tests copy it."""
    path = str(tmp_path_factory.mktemp("built") / "mem")
    build_store(path, embedder)
    return path


def copy_of(built: str, tmp_path) -> str:
    path = str(tmp_path / "mem")
    shutil.copytree(built, path)
    return path


@pytest.mark.parametrize("table", ["text_nodes", "entity_embeddings"])
def test_flipped_bytes_inside_a_page_are_a_store_error(built, tmp_path, embedder, table):
    path = copy_of(built, tmp_path)
    page = flip_leaf(os.path.join(path, DB_FILE), table)
    before = digest(path)
    with pytest.raises(StoreError, match=rf"{path}/memory.sqlite3 is damaged: .*page {page}.*m3 memory check"):
        Memory.open(path, embedder)
    assert digest(path) == before  # refused, not repaired or rewritten


def test_row_contents_the_graph_cannot_decode_are_a_store_error(built, tmp_path, embedder):
    """Flipped bytes inside a cell's text pass SQLite's checks; the graph's loader reports them."""
    path = copy_of(built, tmp_path)
    with sqlite3.connect(os.path.join(path, DB_FILE)) as conn:
        conn.execute("UPDATE entities SET name_votes = '{\"Al' WHERE entity_id = 'person_1'")
    conn.close()
    with pytest.raises(StoreError, match=r"is damaged: reading it failed \(JSONDecodeError"):
        Memory.open(path, embedder)


def test_zero_length_store_is_refused_and_left_empty(tmp_path):
    path = tmp_path / "mem"
    path.mkdir()
    (path / DB_FILE).write_bytes(b"")
    for kwargs in ({}, {"create": False}, {"readonly": True, "verify": False}):
        with pytest.raises(StoreError, match=r"is empty \(0 bytes\).*not opened as a new memory"):
            MemoryStore(str(path), **kwargs)
    assert (path / DB_FILE).stat().st_size == 0
    assert sorted(os.listdir(path)) == [DB_FILE]  # no schema.json, no WAL: nothing was written


def test_text_file_is_refused(tmp_path):
    path = tmp_path / "mem"
    path.mkdir()
    (path / DB_FILE).write_text("these are my notes, not a database\n")
    with pytest.raises(StoreError, match=r"unreadable: not an SQLite database \(it starts with b'these are"):
        MemoryStore(str(path))
    assert (path / DB_FILE).read_text() == "these are my notes, not a database\n"


def test_foreign_sqlite_database_is_refused_and_not_written(tmp_path):
    path = tmp_path / "mem"
    path.mkdir()
    with sqlite3.connect(path / DB_FILE) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('alice')")
    conn.close()
    before = digest(str(path))
    with pytest.raises(
        StoreError, match=r"an SQLite database but not a memory store \(no meta table; tables: \['users'\]"
    ):
        MemoryStore(str(path))
    assert digest(str(path)) == before
    with sqlite3.connect(path / DB_FILE) as conn:  # none of our tables was added
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["users"]
    conn.close()
    with sqlite3.connect(path / DB_FILE) as conn:
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('format', 'other_app')")
    conn.close()
    with pytest.raises(StoreError, match=r"of format 'other_app', not a memory store"):
        MemoryStore(str(path))


def test_schema_json_without_its_database_is_refused(built, tmp_path):
    path = copy_of(built, tmp_path)
    os.remove(os.path.join(path, DB_FILE))
    with pytest.raises(StoreError, match=r"has schema.json but no memory.sqlite3: the memory's database is missing"):
        MemoryStore(path)
    assert not os.path.exists(os.path.join(path, DB_FILE))


def test_only_a_missing_database_is_created_and_completely(tmp_path):
    path = tmp_path / "new" / "mem"
    store = MemoryStore(str(path))
    assert store.integrity_check() == []
    store.close()
    assert sorted(os.listdir(path)) == [DB_FILE, SCHEMA_FILE]  # the temporary build file is gone
    with pytest.raises(StoreError, match="no memory store"):
        MemoryStore(str(tmp_path / "other"), readonly=True)
    assert not (tmp_path / "other").exists()
