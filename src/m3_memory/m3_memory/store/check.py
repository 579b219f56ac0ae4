"""Reading a store's health and size without the graph: the integrity check and the counts that
`m3 memory check` and `m3 memory stats` print (plain SQL, so a damaged store is reported, never raised)."""

from __future__ import annotations

import json
import sqlite3

from m3_memory.graph.records import ENTITY_KINDS


def one_line(problem: str) -> str:
    """An SQLite check message on one line, without its "*** in database main ***" heading."""
    return " ".join(problem.replace("*** in database main ***", "").split())


def integrity_problems(conn: sqlite3.Connection) -> list[str]:
    """Problems found (empty list = healthy): SQLite's own check, the graph's references and the
    JSON fields the graph decodes. A part SQLite cannot read is a problem, not an exception."""
    problems: list[str] = []

    def rows(label: str, sql: str, args: tuple = ()) -> list[tuple]:
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as error:
            problems.append(f"{label}: SQLite cannot read it: {error}")
            return []

    problems += [one_line(row[0]) for row in rows("integrity check", "PRAGMA integrity_check(100)") if row[0] != "ok"]
    problems += [
        f"foreign key violation in {row[0]} (rowid {row[1]})"
        for row in rows("foreign key check", "PRAGMA foreign_key_check")
    ]
    checks = {
        "edge to unknown entity": "SELECT node_id || ' -> ' || entity_id FROM edges WHERE entity_id NOT IN "
        "(SELECT entity_id FROM entities) AND entity_id NOT IN (SELECT old_id FROM aliases)",
        "alias to unknown entity": "SELECT old_id FROM aliases WHERE new_id NOT IN (SELECT entity_id FROM entities)",
        "face/voice without person": "SELECT entity_id FROM entities WHERE kind IN ('face','voice') AND "
        "person_id NOT IN (SELECT entity_id FROM entities WHERE kind='person')",
        "text node without clip": "SELECT node_id FROM text_nodes WHERE clip_index NOT IN "
        "(SELECT clip_index FROM clips)",
    }
    for label, sql in checks.items():
        problems += [f"{label}: {row[0]}" for row in rows(label, sql)]
    for label, sql in (
        ("clip entity_ids", "SELECT clip_index, entity_ids FROM clips"),
        ("entity name_votes", "SELECT entity_id, name_votes FROM entities"),
    ):
        for key, text in rows(label, sql):
            try:
                json.loads(text)
            except (TypeError, ValueError):
                problems.append(f"{label} of {key}: not JSON ({str(text)[:40]!r})")
    dim = rows("meta", "SELECT value FROM meta WHERE key='text_dim'")
    if dim:
        problems += [
            f"text node {node_id}: embedding size does not match text_dim {dim[0][0]}"
            for (node_id,) in rows(
                "text node embeddings",
                "SELECT node_id FROM text_nodes WHERE length(embedding) != ?",
                (int(dim[0][0]) * 4,),
            )
        ]
    for kind in ENTITY_KINDS:
        prefix = f"{kind}_"
        counter = rows("counters", "SELECT value FROM counters WHERE name=?", (kind,))
        top = rows("entities", "SELECT max(seq) FROM entities WHERE kind=?", (kind,))
        if top and top[0][0] is not None and (not counter or int(counter[0][0]) < int(top[0][0])):
            problems.append(f"counter {kind} is behind the highest {prefix} id {top[0][0]}")
    return problems


def counts(conn: sqlite3.Connection) -> dict:
    """What a store holds (merged persons are gone from entities; their ids are in merged_ids).
    sqlite3.DatabaseError propagates: callers report a store they cannot count as damaged."""
    texts = dict(conn.execute("SELECT kind, count(*) FROM text_nodes GROUP BY kind").fetchall())
    entities = dict(conn.execute("SELECT kind, count(*) FROM entities GROUP BY kind").fetchall())
    clips, last = conn.execute("SELECT count(*), coalesce(max(clip_index), -1) FROM clips").fetchone()
    names = conn.execute("SELECT entity_id, name FROM entities WHERE kind='person' AND name != '' ORDER BY seq")
    return {
        "clips": clips,
        "last_clip_index": last,
        "episodic": texts.get("episodic", 0),
        "semantic": texts.get("semantic", 0),
        "faces": entities.get("face", 0),
        "voices": entities.get("voice", 0),
        "persons": entities.get("person", 0),
        "objects": entities.get("object", 0),
        "texts": entities.get("text", 0),
        "merged_ids": conn.execute("SELECT count(*) FROM aliases").fetchone()[0],
        "degraded_clips": conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'degraded_clip_%'").fetchone()[0],
        "names": dict(names.fetchall()),
    }
