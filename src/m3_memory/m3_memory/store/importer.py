"""`m3 memory import EXPORT NEW_DIR`: a new store from what `m3 memory export --embeddings` wrote.

The export's size is checked before it is read, then the whole file is checked (format, schema
version, every row's columns and value types) before a row is written. The store is built aside,
must pass the integrity check and open, and only then is renamed to NEW_DIR: a refused import
leaves nothing behind. An export without embeddings is refused (its memories could not be searched).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import sqlite3

from m3_memory.store.check import integrity_problems
from m3_memory.store.from_rows import columns, insert_rows, new_store_dir, open_and_count, raise_counters
from m3_memory.store.schema import ADDED_COLUMNS, SCHEMA_VERSION, TABLES
from m3_memory.store.sqlite_store import FORMAT_NAME, MemoryStore, vector_to_blob

MAX_EXPORT_BYTES = 4 << 30  # --max-bytes default: an export is read whole into memory
_JSON_COLUMNS = {("clips", "entity_ids"), ("entities", "name_votes")}
_VECTOR_COLUMNS = {("text_nodes", "embedding"), ("entity_embeddings", "embedding")}


class ExportFileError(ValueError):
    """The file is not a usable export; the message names the file and the part that is wrong."""


def read_export(path: str, max_bytes: int = MAX_EXPORT_BYTES) -> dict:
    """The export's JSON, after its size, format, schema version and embeddings are checked."""
    try:
        size = os.path.getsize(path)
    except OSError as error:
        raise ExportFileError(f"cannot read export {path}: {error}") from error
    if size > max_bytes:
        raise ExportFileError(f"export {path} is {size} bytes, more than --max-bytes {max_bytes}; raise the limit")
    try:
        with open(path, "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise ExportFileError(f"export {path} is not readable JSON: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
        raise ExportFileError(f'{path} is not an export of a memory (no "format": "{FORMAT_NAME}")')
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        raise ExportFileError(
            f"export {path} has schema version {version!r}; this program reads 1..{SCHEMA_VERSION} (upgrade m3_memory)"
        )
    nodes = data.get("text_nodes")
    if "entity_embeddings" not in data or (isinstance(nodes, list) and any("embedding" not in n for n in nodes)):
        raise ExportFileError(
            f"export {path} holds no embeddings; export again with `m3 memory export DIR --embeddings -o FILE`"
        )
    return data


def _value(where: str, table: str, name: str, declared: str, not_null: bool, value):
    """One exported value as the store holds it; ExportFileError when its type is wrong."""
    if value is None:
        if not_null:
            raise ExportFileError(f"{where}: {name} is null")
        return None
    if (table, name) in _JSON_COLUMNS:
        return json.dumps(value)
    if (table, name) in _VECTOR_COLUMNS:
        if not isinstance(value, list) or not value or not all(_is_number(v) for v in value):
            raise ExportFileError(f"{where}: {name} is not a list of numbers")
        return vector_to_blob(value)
    if declared == "BLOB":
        try:
            return base64.b64decode(value, validate=True)
        except (TypeError, ValueError, binascii.Error) as error:
            raise ExportFileError(f"{where}: {name} is not base64") from error
    ok = {
        "INTEGER": isinstance(value, int) and not isinstance(value, bool),
        "REAL": _is_number(value),
        "TEXT": isinstance(value, str),
    }.get(declared, False)
    if not ok:
        raise ExportFileError(f"{where}: {name} should be {declared.lower()}, got {type(value).__name__}")
    return value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _rows(path: str, data: dict, table: str, cols: list[tuple[str, str, bool]]) -> list[tuple]:
    items = data.get(table, [])
    if not isinstance(items, list):
        raise ExportFileError(f"export {path}: {table} is not a list")
    names = [c[0] for c in cols]
    # columns a newer schema added: an older export's rows lack them and take the value older rows have
    added = {n: v for (t, n), (since, v) in ADDED_COLUMNS.items() if t == table and data["schema_version"] < since}
    rows = []
    for index, item in enumerate(items):
        where = f"export {path}: {table}[{index}]"
        if added and isinstance(item, dict):
            item = {**added, **item}
        if not isinstance(item, dict) or sorted(item) != sorted(names):
            got = sorted(item) if isinstance(item, dict) else type(item).__name__
            raise ExportFileError(f"{where}: expected the fields {names}, got {got}")
        rows.append(tuple(_value(where, table, *col, item[col[0]]) for col in cols))
    return rows


def _pairs(path: str, data: dict, key: str, kind: type) -> list[tuple]:
    items = data.get(key, {})
    if not isinstance(items, dict) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in items.values()):
        raise ExportFileError(f"export {path}: {key} should map names to {kind.__name__} values")
    return sorted(items.items())


def import_export(path: str, target: str, max_bytes: int = MAX_EXPORT_BYTES) -> dict:
    """Build a new store at target (missing or an empty directory) from the export at path; returns
    the new store's counts. Raises ExportFileError (bad export) or StoreError (target taken)."""
    data = read_export(path, max_bytes)
    meta = [(k, v) for k, v in _pairs(path, data, "meta", str) if k not in ("format", "schema_version")]
    counters = _pairs(path, data, "counters", int)
    with new_store_dir(target) as work:
        store = MemoryStore(work)
        try:
            conn = store.conn()
            tables = {t: columns(conn, t) for t in TABLES if t not in ("meta", "counters")}
            rows = {t: _rows(path, data, t, cols) for t, cols in tables.items()}  # all checked before writing
            try:
                with store.transaction() as tx:
                    insert_rows(tx, "meta", ["key", "value"], meta, "OR REPLACE")
                    insert_rows(tx, "counters", ["name", "value"], counters, "")
                    for table, cols in tables.items():
                        insert_rows(tx, table, [c[0] for c in cols], rows[table], "")
                    raise_counters(tx)
            except sqlite3.IntegrityError as error:
                raise ExportFileError(f"export {path} is inconsistent: {error}") from error
            problems = integrity_problems(conn)
        finally:
            store.close()
        if problems:
            raise ExportFileError(f"export {path} is inconsistent: {'; '.join(problems[:5])}")
        opened = open_and_count(work)
    return {"imported": os.path.abspath(path), "memory_dir": os.path.abspath(os.path.expanduser(target)), **opened}
