"""Salvage a damaged memory store into a new one (`m3 memory check DIR --repair NEW_DIR`).

SQLite's own means, through Python's sqlite3 module: each table of the damaged store is read in
rowid order; where a page cannot be read the scan seeks past it (the rows on that page are lost, and
the rowid gap is reported) and goes on. Rows whose text is not UTF-8, whose JSON does not parse,
whose values have the wrong type or whose text embedding has the wrong size are dropped. Then rows
that point at lost rows are removed (as the foreign keys and the graph's loader require) and the id
counters are raised past every id kept, so new ids never repeat an old one.

Why not the sqlite3 command line's `.recover`: set-up does not install it (it is not a dependency,
and Python's sqlite3 module has no recovery API), while this runs wherever the memory runs, offline.
`.recover` also reads pages no b-tree reaches any more; this reaches every row whose own page and
the pages above it are readable. The damaged store is opened read-only and never changed.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator

from m3_memory.store.check import integrity_problems
from m3_memory.store.from_rows import columns, drop_orphans, insert_rows, new_store_dir, open_and_count, raise_counters
from m3_memory.store.schema import ADDED_COLUMNS, TABLES, V2_TABLES
from m3_memory.store.sqlite_store import MemoryStore

MAX_ROWID = 2**63 - 1
_JSON_COLUMNS = {("clips", "entity_ids"), ("entities", "name_votes")}
_TYPES = {"INTEGER": (int,), "REAL": (int, float), "TEXT": (bytes,), "BLOB": (bytes,)}


def readable_rows(conn: sqlite3.Connection, table: str, names: list[str], gaps: list) -> Iterator[tuple]:
    """Every row SQLite can still read, in rowid order. Each jump over rows it cannot read is
    appended to gaps as {"after_rowid": the last row read (None: none yet), "resumed_at_rowid": the
    next row read (None: nothing after it could be read)}."""
    select = f"SELECT rowid, {', '.join(names)} FROM {table} WHERE rowid >= ? ORDER BY rowid"
    start, last = -MAX_ROWID - 1, None
    while True:
        try:
            for row in conn.execute(select, (start,)):
                last = row[0]
                yield row[1:]
            return
        except sqlite3.DatabaseError:
            read_before = last is not None and last >= start
            start = _next_readable(conn, table, names, last if read_before else start - 1)
            gaps.append({"after_rowid": last, "resumed_at_rowid": start})
            if start is None:
                return


def _next_readable(conn: sqlite3.Connection, table: str, names: list[str], after: int) -> int | None:
    """The lowest rowid from which a row reads again, past one that fails after `after` (the probe
    reads the same columns as the scan, so an unreadable row is never retried): doubling steps until
    one succeeds, then a binary search back; None when none does."""
    probe = f"SELECT rowid, {', '.join(names)} FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT 1"

    def first_from(rowid: int) -> tuple[bool, int | None]:
        try:
            row = conn.execute(probe, (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            return False, None
        return True, None if row is None else row[0]

    bad, step = after + 1, 1
    while True:
        good = after + 1 + step
        if good > MAX_ROWID:
            return None
        ok, found = first_from(good)
        if ok:
            break
        bad, step = good, step * 2
    while good - bad > 1:
        middle = (bad + good) // 2
        ok, first = first_from(middle)
        if ok:
            good, found = middle, first
        else:
            bad = middle
    return found


def _clean(table: str, cols: list[tuple[str, str, bool]], row: tuple, embedding_bytes: int) -> tuple | None:
    """The row with its text decoded, or None when a value is unusable."""
    out = []
    for (name, declared, not_null), value in zip(cols, row, strict=True):
        if value is None:
            if not_null:
                return None
        elif not isinstance(value, _TYPES.get(declared, (object,))) or isinstance(value, bool):
            return None
        elif declared == "TEXT":
            try:
                value = value.decode("utf-8")
                if (table, name) in _JSON_COLUMNS:
                    json.loads(value)
            except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                return None
        elif (table, name) == ("text_nodes", "embedding") and embedding_bytes and len(value) != embedding_bytes:
            return None
        elif (table, name) == ("entity_embeddings", "embedding") and (not value or len(value) % 4):
            return None
        out.append(value)
    return tuple(out)


def salvage(source_dir: str, target: str) -> dict:
    """Copy what can be read from the store in source_dir into a new store at target (which must not
    exist, or be empty); returns per table rows kept, dropped and rowid gaps, the orphans removed,
    the problems the new store still has, and its counts once it opened. Raises StoreError when the
    source is not a memory store at all, or target is taken."""
    source = MemoryStore(source_dir, create=False, readonly=True, verify=False)
    try:
        src = source.conn()
        src.text_factory = bytes  # undecodable text drops its row instead of stopping the scan
        try:
            dim = int(src.execute("SELECT value FROM meta WHERE key='text_dim'").fetchone()[0])
        except (sqlite3.DatabaseError, TypeError, ValueError):
            dim = 0  # unknown: embedding sizes are then left to the integrity check
        tables: dict[str, dict] = {}
        with new_store_dir(target) as work:
            dest = MemoryStore(work)
            try:
                conn = dest.conn()
                conn.execute("PRAGMA foreign_keys=OFF")  # rows may point at lost rows until drop_orphans
                present = {
                    bytes(n).decode() for (n,) in src.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
                for table in TABLES:
                    if table not in present and table in V2_TABLES:  # a version-1 store: nothing to copy
                        continue
                    cols = columns(conn, table)
                    names = [c[0] for c in cols]
                    # a column a newer schema added is not in an older store: its rows take the default
                    had = {row[1] for row in src.execute(f"PRAGMA table_info({table})")}
                    had = {n.decode() if isinstance(n, bytes) else n for n in had}
                    fill = {  # as the scan reads text: bytes, decoded by _clean
                        n: v.encode() if isinstance(v, str) else v
                        for (t, n), (_, v) in ADDED_COLUMNS.items()
                        if t == table and n not in had
                    }
                    read_names = [n for n in names if n not in fill]
                    gaps: list = []
                    read = 0

                    def usable(
                        table=table, cols=cols, names=names, gaps=gaps, fill=fill, read_names=read_names
                    ) -> Iterator[tuple]:
                        nonlocal read
                        for row in readable_rows(src, table, read_names, gaps):
                            read += 1
                            if fill:
                                values = dict(zip(read_names, row, strict=True))
                                row = tuple(values[n] if n in values else fill[n] for n in names)
                            if (clean := _clean(table, cols, row, 4 * dim)) is not None:
                                yield clean

                    conflict = "OR REPLACE" if table in ("meta", "counters") else "OR IGNORE"
                    with dest.transaction() as tx:
                        kept = insert_rows(tx, table, names, usable(), conflict)
                    tables[table] = {"kept": kept, "dropped": read - kept, "unreadable_rowid_gaps": gaps}
                with dest.transaction() as tx:
                    removed = drop_orphans(tx)
                    raise_counters(tx)
                problems = integrity_problems(conn)
            finally:
                dest.close()
            opened = open_and_count(work)
    finally:
        source.close()
    output = os.path.abspath(os.path.expanduser(target))
    return {"output": output, "tables": tables, "orphans_removed": removed, "problems": problems, **opened}
