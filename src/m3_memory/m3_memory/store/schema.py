"""The SQLite store's tables: their DDL for a new store, the schema version it is at, the steps that bring
an older store up to it, and the tables in the order export, import and repair copy them.

Why apart from the store (m3_memory.store.sqlite_store): the store opens, checks and connects; what
its tables are, and how each schema version changed them, is written down in this one place.
"""

from __future__ import annotations

# 2 added the place tables (text_places, clip_paths, sightings); 3 the things seen (object and text
# entities, with a label); an older store is brought up to date when it is opened for writing
SCHEMA_VERSION = 3

DDL = """
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
{entities}
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
# Schema 2: where each memory happened, the robot's path through each clip (m3_memory.place), each entity's
# sightings per clip (first and last observation there, where the robot was at the last one), and when a
# memory's statement was replaced by a newer one (validity)
V2_DDL = """
CREATE TABLE IF NOT EXISTS text_places (
    node_id TEXT PRIMARY KEY REFERENCES text_nodes(node_id), frame_id TEXT NOT NULL,
    x REAL NOT NULL, y REAL NOT NULL, yaw REAL NOT NULL, region TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS clip_paths (
    clip_index INTEGER NOT NULL REFERENCES clips(clip_index), stamp_ns INTEGER NOT NULL, frame_id TEXT NOT NULL,
    x REAL NOT NULL, y REAL NOT NULL, yaw REAL NOT NULL, PRIMARY KEY (clip_index, stamp_ns));
CREATE TABLE IF NOT EXISTS sightings (
    entity_id TEXT NOT NULL, clip_index INTEGER NOT NULL REFERENCES clips(clip_index), first_ns INTEGER NOT NULL,
    last_ns INTEGER NOT NULL, frame_id TEXT, x REAL, y REAL, yaw REAL, region TEXT,
    PRIMARY KEY (entity_id, clip_index));
CREATE TABLE IF NOT EXISTS validity (
    node_id TEXT PRIMARY KEY REFERENCES text_nodes(node_id), valid_until_ns INTEGER NOT NULL,
    superseded_by TEXT NOT NULL);
"""
DDL += V2_DDL
# Schema 3: object and text entities (m3_memory.graph.things), labelled with a class or a reading
_ENTITIES = """
CREATE TABLE IF NOT EXISTS {table} (
    entity_id TEXT PRIMARY KEY, seq INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('face','voice','person','object','text')),
    name TEXT NOT NULL DEFAULT '', person_id TEXT NOT NULL DEFAULT '', observation_count INTEGER NOT NULL DEFAULT 0,
    first_clip INTEGER NOT NULL DEFAULT -1, last_clip INTEGER NOT NULL DEFAULT -1,
    first_ns INTEGER NOT NULL DEFAULT 0, last_ns INTEGER NOT NULL DEFAULT 0,
    name_votes TEXT NOT NULL DEFAULT '{{}}', crop_score REAL NOT NULL DEFAULT -1, crop_jpeg BLOB,
    label TEXT NOT NULL DEFAULT '', UNIQUE (kind, seq));"""
DDL = DDL.format(entities=_ENTITIES.format(table="entities"))
_V2_ENTITY_COLUMNS = (
    "entity_id, seq, kind, name, person_id, observation_count, first_clip, last_clip, first_ns, last_ns, name_votes,"
    " crop_score, crop_jpeg"
)
# SQLite cannot widen a CHECK: the table is rebuilt (its rows copied) with foreign keys off, in one transaction
V3_UPGRADE = (
    _ENTITIES.format(table="entities_v3")
    + f"INSERT INTO entities_v3 ({_V2_ENTITY_COLUMNS}) SELECT {_V2_ENTITY_COLUMNS} FROM entities;"
    "DROP TABLE entities; ALTER TABLE entities_v3 RENAME TO entities;"
)
ADDED_COLUMNS = {("entities", "label"): (3, "")}  # column -> (schema that added it, value for older rows)
# In dependency order (a table after those it references): export, import and repair copy in this order.
TABLES = (
    "meta", "counters", "clips", "text_nodes", "node_clips", "entities", "entity_embeddings", "aliases", "edges",
    "evidence", "text_places", "clip_paths", "sightings", "validity",
)  # fmt: skip
V2_TABLES = ("text_places", "clip_paths", "sightings", "validity")  # new in schema 2: a version-1 store has none
