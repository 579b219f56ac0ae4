"""The memory graph: face / voice / person entities, episodic / semantic text nodes, edges and weights.

The store is the source of truth; this class keeps the metadata in RAM (and the vectors in ANN
indexes) so that searches never touch the disk, and applies one clip at a time in one transaction.
Every public method is thread-safe: a clip is applied under a lock that searches also take briefly,
so a search sees either none or all of a clip.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from m3_memory.ann_index import EXACT_MAX, CosineIndex
from m3_memory.errors import StoreError
from m3_memory.records import (
    KIND_EPISODIC,
    KIND_FACE,
    KIND_PERSON,
    KIND_SEMANTIC,
    KIND_VOICE,
    ClipEvidence,
    EntityRecord,
    MemoryDraft,
    TextNode,
)
from m3_memory.store import MemoryStore, blob_to_vector, vector_to_blob
from m3_memory.tags import kind_of, seq_of, tags_in

DEGRADED_PREFIX = "degraded_clip_"  # meta key of a clip a fallback memorizer wrote; its value says why


@dataclass
class GraphConfig:
    """Thresholds of the graph (node parameters; defaults documented in the README)."""

    reinforce_threshold: float = 0.85  # cosine above which a semantic memory reinforces an existing one
    weaken_threshold: float = 0.0  # cosine below which it weakens an existing one about the same entities
    face_match_threshold: float = 0.93  # cosine for a new perception face id to join a stored face (dlib: others 0.88)
    voice_match_threshold: float = 0.85  # cosine for a new perception voice id to join a stored voice (resemblyzer)
    equivalence_min_confidence: float = 0.5  # EntityMatch confidence needed to unite two persons
    equivalence_min_evidence: int = 1  # EntityMatch evidence_count needed to unite two persons
    max_face_embeddings: int = 10  # per face entity (reference: 10)
    max_voice_embeddings: int = 20  # per voice entity (reference: 20)


@dataclass
class ClipOutcome:
    """What one applied clip changed: returned to the node so it can publish ClipMemory."""

    clip_index: int
    episodic: list[str] = field(default_factory=list)
    semantic: list[str] = field(default_factory=list)  # created or reinforced
    weakened: list[str] = field(default_factory=list)
    merges: list[tuple[str, str]] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)


@dataclass
class MemorizerOutput:
    """A memorizer's conclusions about one clip (ids are memory entity ids)."""

    drafts: list[MemoryDraft] = field(default_factory=list)
    names: list[tuple[str, str]] = field(default_factory=list)  # (entity id, name)
    equivalences: list[tuple[str, str, float, int]] = field(default_factory=list)  # (id1, id2, confidence, count)
    degraded: str = ""  # why a fallback memorizer wrote this clip (kept in meta as degraded_clip_N), "" = normal


def usable_embedding(values) -> np.ndarray | None:
    """A finite, non-zero embedding as float32, or None (such evidence keeps its observation only)."""
    if values is None or len(values) == 0:
        return None
    vector = np.asarray(values, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(vector)) or float(np.linalg.norm(vector)) < 1e-9:
        return None
    return vector


class MemoryGraph:
    """Entity-centric memory over a MemoryStore; see module docstring for the locking model."""

    def __init__(self, store: MemoryStore, text_dim: int, config: GraphConfig | None = None) -> None:
        self.store = store
        self.text_dim = text_dim
        self.config = config or GraphConfig()
        self.lock = threading.RLock()
        self.ingest_lock = threading.RLock()  # one clip at a time (held across memorize + embed + apply)
        self.session_map: dict[str, str] = {}  # perception id -> memory entity id (this run only)
        stored_dim = store.get_meta("text_dim")
        if stored_dim is not None and int(stored_dim) != text_dim:
            raise ValueError(f"store holds {stored_dim}-d text embeddings; the embedder gives {text_dim}-d")
        try:
            self._load()
        except StoreError:
            raise
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as error:
            # Rows SQLite still reads can hold flipped bytes (bad JSON, a clip that is gone): the store is
            # damaged, which the node reports as STORE_UNAVAILABLE rather than dying.
            raise StoreError(
                f"memory store {store.db_path} is damaged: reading it failed ({type(error).__name__}: {error}); "
                f"`m3 memory check {store.memory_dir}` lists the problems and `--repair NEW_DIR` salvages the rest"
            ) from error

    # -- loading --------------------------------------------------------------------------------
    def _load(self) -> None:
        """(Re)build every cache and index from the store."""
        conn = self.store.conn()
        with self.lock:
            self.text: dict[str, TextNode] = {}
            self.text_by_seq: dict[int, str] = {}
            self.semantic_vectors: dict[str, np.ndarray] = {}
            self.clips: dict[int, dict] = {}
            self.entities: dict[str, EntityRecord] = {}
            self.aliases: dict[str, str] = {}
            self.entity_samples: dict[str, list[np.ndarray]] = {}
            self.entity_memories: dict[str, list[str]] = {}
            self.evidence: dict[tuple[str, str], tuple[float, int]] = {}
            self.node_clips: dict[str, list[int]] = {}  # semantic node -> clips that created/reinforced it
            self.text_index = CosineIndex(self.text_dim, capacity=1024)
            self.entity_index: dict[str, CosineIndex] = {}
            for idx, start, end, stored, ids in conn.execute(
                "SELECT clip_index, start_ns, end_ns, stored_ns, entity_ids FROM clips"
            ):
                self.clips[idx] = {
                    "start_ns": start,
                    "end_ns": end,
                    "stored_ns": stored,
                    "entity_ids": json.loads(ids),
                    "episodic": [],
                    "semantic": [],
                }
            edges: dict[str, list[str]] = {}
            for node_id, entity_id in conn.execute("SELECT node_id, entity_id FROM edges ORDER BY rowid"):
                edges.setdefault(node_id, []).append(entity_id)
            saved = self._saved_text_index(conn)
            labels: list[int] = []
            semantic: list[tuple[str, int]] = []  # (node id, row of its vector)
            for row in conn.execute(
                "SELECT node_id, seq, kind, text, clip_index, start_ns, end_ns, weight FROM text_nodes ORDER BY seq"
            ):
                node = TextNode(*row, entity_ids=edges.get(row[0], []))
                self._cache_text(node)
                if node.kind == KIND_SEMANTIC:
                    semantic.append((node.node_id, len(labels)))
                labels.append(node.seq)
                if node.kind == KIND_EPISODIC:
                    self.clips[node.clip_index]["episodic"].append(node.node_id)
                    self.node_clips[node.node_id] = [node.clip_index]
            vectors = self._text_vectors(conn, len(labels))
            for node_id, row in semantic:
                self.semantic_vectors[node_id] = vectors[row].copy()
            self.text_index_loaded = saved is not None  # True: read from text_index.hnsw, not rebuilt
            if saved is not None:
                self.text_index = CosineIndex.load(saved, self.text_dim, labels, vectors)
            elif labels:
                self.text_index = CosineIndex(self.text_dim, capacity=len(labels) + 1024)
                self.text_index.add(labels, vectors[: len(labels)])
            del vectors
            for node_id, clip_index in conn.execute(
                "SELECT node_id, clip_index FROM node_clips WHERE delta > 0 ORDER BY rowid"
            ):
                self.clips[clip_index]["semantic"].append(node_id)
                self.node_clips.setdefault(node_id, []).append(clip_index)
            for row in conn.execute(
                "SELECT entity_id, seq, kind, name, person_id, observation_count, first_clip, last_clip, first_ns,"
                " last_ns, crop_score, name_votes FROM entities"
            ):
                record = EntityRecord(*row[:11], name_votes=json.loads(row[11]))
                self.entities[record.entity_id] = record
            for old, new in conn.execute("SELECT old_id, new_id FROM aliases"):
                self.aliases[old] = new
            for entity_id, blob in conn.execute(
                "SELECT entity_id, embedding FROM entity_embeddings ORDER BY entity_id, slot"
            ):
                self.entity_samples.setdefault(entity_id, []).append(blob_to_vector(blob))
            for entity_id in self.entity_samples:
                self._index_entity(entity_id)
            for id1, id2, confidence, count in conn.execute(
                "SELECT id1, id2, confidence, evidence_count FROM evidence WHERE kind='match'"
            ):
                self.evidence[(id1, id2)] = (confidence, count)

    # -- persisted text index ----------------------------------------------------------------------
    def _index_paths(self) -> tuple[str, str]:
        base = os.path.join(self.store.memory_dir, "text_index")
        return base + ".hnsw", base + ".json"

    def _text_vectors(self, conn, count: int) -> np.ndarray:
        """The text embeddings in seq order, in one block with room to grow (the text index adopts it
        when it loads its saved graph), read in chunks: per-row numpy work doubled a 1M open."""
        vectors = np.zeros((count + 1024, self.text_dim), dtype=np.float32)
        size, filled = 4 * self.text_dim, 0
        cursor = conn.execute("SELECT node_id, embedding FROM text_nodes ORDER BY seq")
        while rows := cursor.fetchmany(8192):
            data = b"".join(blob for _, blob in rows)
            if len(data) != size * len(rows):
                node_id, blob = next((n, b) for n, b in rows if len(b) != size)
                raise StoreError(
                    f"text node {node_id}: embedding of {len(blob)} bytes, not {size} (text_dim "
                    f"{self.text_dim}): the store is damaged (m3 memory check lists what)"
                )
            vectors[filled : filled + len(rows)] = np.frombuffer(data, dtype="<f4").reshape(len(rows), -1)
            filled += len(rows)
        if filled != count:
            raise StoreError(f"text nodes changed while the memory opened ({count} then {filled})")
        return vectors

    def _saved_text_index(self, conn) -> str | None:
        """The saved text index when it matches the store exactly (text nodes are only ever added,
        so equal count and highest seq mean equal contents); None means rebuild from the store."""
        path, meta_path = self._index_paths()
        try:
            with open(meta_path, encoding="utf-8") as handle:
                meta = json.load(handle)
        except (OSError, ValueError):
            return None
        count, top = conn.execute("SELECT count(*), coalesce(max(seq), 0) FROM text_nodes").fetchone()
        matches = (meta.get("count"), meta.get("max_seq"), meta.get("dim")) == (count, top, self.text_dim)
        return path if matches and count > EXACT_MAX and os.path.isfile(path) else None

    def save_text_index(self) -> bool:
        """Save the text index next to the store (on close) so large memories open fast; the
        metadata is written last, so a torn save is detected as a mismatch and rebuilt."""
        path, meta_path = self._index_paths()
        with self.ingest_lock, self.lock:
            count = len(self.text)
            if count <= EXACT_MAX:
                return False
            for stale in (meta_path, path):
                if os.path.exists(stale):
                    os.remove(stale)
            self.text_index.save(path + ".tmp")
            os.replace(path + ".tmp", path)
            meta = {"count": count, "max_seq": max(self.text_by_seq), "dim": self.text_dim}
            with open(meta_path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(meta, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(meta_path + ".tmp", meta_path)
            return True

    def _cache_text(self, node: TextNode) -> None:
        self.text[node.node_id] = node
        self.text_by_seq[node.seq] = node.node_id
        for entity_id in node.entity_ids:
            self.entity_memories.setdefault(entity_id, []).append(node.node_id)

    def _index_entity(self, entity_id: str) -> None:
        """Index an entity's centroid (label = its number) in the index of its kind and dimension."""
        samples = self.entity_samples.get(entity_id) or []
        if not samples:
            return
        kind = kind_of(entity_id)
        centroid = np.mean(np.stack(samples), axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        key = f"{kind}:{centroid.shape[0]}"
        index = self.entity_index.get(key)
        if index is None:
            index = self.entity_index[key] = CosineIndex(centroid.shape[0], capacity=256)
        index.add([seq_of(entity_id)], centroid[None, :])

    # -- lookups ----------------------------------------------------------------------------------
    def resolve(self, entity_id: str) -> str:
        """The surviving id of a (possibly merged) entity id."""
        with self.lock:
            seen = set()
            while entity_id in self.aliases and entity_id not in seen:
                seen.add(entity_id)
                entity_id = self.aliases[entity_id]
            return entity_id

    def person_of(self, entity_id: str) -> str | None:
        """Canonical person of a face, voice or person id; None when unknown."""
        with self.lock:
            entity_id = self.resolve(entity_id)
            record = self.entities.get(entity_id)
            if record is None:
                return None
            if record.kind == KIND_PERSON:
                return entity_id
            return self.resolve(record.person_id)

    def members_of(self, person_id: str) -> list[str]:
        """Faces and voices of a person, in creation order (faces first)."""
        with self.lock:
            person_id = self.resolve(person_id)
            members = [
                r for r in self.entities.values() if r.kind != KIND_PERSON and self.resolve(r.person_id) == person_id
            ]
            return [r.entity_id for r in sorted(members, key=lambda r: (r.kind != KIND_FACE, r.seq))]

    def aliases_of(self, entity_id: str) -> list[str]:
        """Ids that resolve to entity_id (merged persons), sorted."""
        with self.lock:
            return sorted(old for old in self.aliases if self.resolve(old) == entity_id and old != entity_id)

    def display_name(self, entity_id: str) -> str:
        """The name of the person an id belongs to, or empty."""
        person = self.person_of(entity_id)
        return self.entities[person].name if person else ""

    @property
    def last_clip_index(self) -> int:
        with self.lock:
            return max(self.clips, default=-1)

    def person_set(self, entity_ids: list[str]) -> frozenset[str]:
        """Entities a memory is about, folded to persons (so face and voice of one human compare equal)."""
        out = set()
        for entity_id in entity_ids:
            person = self.person_of(entity_id)
            out.add(person or entity_id)
        return frozenset(out)

    # -- entity matching --------------------------------------------------------------------------
    def map_entity(self, perception_id: str, embeddings: list[np.ndarray]) -> tuple[str, bool]:
        """Memory id for a perception id (face_N / voice_N of this run): known this run, matched by
        embedding to a stored entity not already claimed this run, or new. Returns (id, is_new)."""
        with self.lock:
            if perception_id in self.session_map:
                return self.session_map[perception_id], False
            kind = kind_of(perception_id)
            if kind not in (KIND_FACE, KIND_VOICE):
                raise ValueError(f"perception ids are face_N or voice_N, got {perception_id!r}")
            threshold = self.config.face_match_threshold if kind == KIND_FACE else self.config.voice_match_threshold
            if embeddings:
                centroid = np.mean(np.stack(embeddings), axis=0)
                centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
                index = self.entity_index.get(f"{kind}:{centroid.shape[0]}")
                claimed = {v for v in self.session_map.values()}
                if index is not None:
                    for label, score in index.search(centroid, 1, keep=lambda label: f"{kind}_{label}" not in claimed):
                        if score >= threshold:
                            self.session_map[perception_id] = f"{kind}_{label}"
                            return f"{kind}_{label}", False
            return "", True

    def predict_new_ids(self, perception_ids: list[str]) -> dict[str, str]:
        """Ids the next apply_clip will give to these new entities (exact while ingest_lock is held)."""
        conn = self.store.conn()
        counters = dict(conn.execute("SELECT name, value FROM counters").fetchall())
        out = {}
        for perception_id in perception_ids:
            kind = kind_of(perception_id)
            counters[kind] = counters.get(kind, 0) + 1
            out[perception_id] = f"{kind}_{counters[kind]}"
        return out

    # -- applying one clip ------------------------------------------------------------------------
    def apply_clip(
        self,
        clip: ClipEvidence,
        mapped: dict[str, str],
        output: MemorizerOutput,
        draft_vectors: np.ndarray,
        new_entities: list[str],
    ) -> ClipOutcome:
        """Write one clip atomically. `mapped` maps perception ids to memory ids ("" = create),
        `new_entities` lists the perception ids to create, in creation order."""
        with self.ingest_lock, self.lock:
            if clip.clip_index in self.clips:
                raise ValueError(f"clip {clip.clip_index} is already stored")
            try:
                with self.store.transaction() as conn:
                    outcome = self._apply(conn, clip, mapped, output, draft_vectors, new_entities)
            except BaseException:
                self._load()  # the caches may hold half of the failed clip: rebuild them from the store
                self.session_map = {k: v for k, v in self.session_map.items() if v in self.entities}
                raise
            return outcome

    def add_episodic_bulk(self, clips: list[tuple[ClipEvidence, list[MemoryDraft]]], vectors: np.ndarray) -> int:
        """Bulk building of large memories: many clips of episodic memories in ONE transaction and
        one batched index insert. Each clip is new and holds only episodic drafts whose tags name
        known entities; no entity observations, names or matches (use apply_clip for those). A
        repeated text within a clip is stored once; the replay check of apply_clip (same text and
        times in an earlier clip) is skipped, so the caller must not feed the same event twice.
        Returns the number of memories stored; atomic like apply_clip (all of it or none)."""
        total = sum(len(drafts) for _, drafts in clips)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(total, self.text_dim)
        with self.ingest_lock, self.lock:
            indexes = [clip.clip_index for clip, _ in clips]
            if len(set(indexes)) != len(indexes) or any(i in self.clips for i in indexes):
                raise ValueError("bulk clips must be new and distinct")
            clip_rows, node_rows, edge_rows, nodes, labels, rows = [], [], [], [], [], []
            entity_cache: dict[str, list[str]] = {}
            stored_ns = time.time_ns()
            try:
                with self.store.transaction() as conn:
                    if self.store.get_meta("text_dim") is None:
                        conn.execute("INSERT INTO meta(key, value) VALUES ('text_dim', ?)", (str(self.text_dim),))
                    row = conn.execute("SELECT value FROM counters WHERE name='text'").fetchone()
                    seq = 0 if row is None else int(row[0])
                    offset = 0
                    for clip, drafts in clips:
                        seen_texts: set[str] = set()
                        present: set[str] = set()
                        for draft in drafts:
                            offset += 1
                            if draft.kind != KIND_EPISODIC:
                                raise ValueError("bulk ingest stores episodic memories only")
                            if draft.text in seen_texts:
                                continue
                            seen_texts.add(draft.text)
                            tags = tags_in(draft.text)
                            key = " ".join(tags)
                            entity_ids = entity_cache.get(key)
                            if entity_ids is None:
                                entity_ids = entity_cache[key] = [e for e in tags if self.resolve(e) in self.entities]
                            present.update(entity_ids)
                            seq += 1
                            node = TextNode(
                                f"{KIND_EPISODIC}_{seq}", seq, KIND_EPISODIC, draft.text, clip.clip_index,
                                draft.start_ns, draft.end_ns, 1.0, entity_ids,
                            )  # fmt: skip
                            node_rows.append(
                                (node.node_id, seq, KIND_EPISODIC, node.text, clip.clip_index, node.start_ns,
                                 node.end_ns, 1.0, vector_to_blob(vectors[offset - 1]))
                            )  # fmt: skip
                            edge_rows += [(node.node_id, e) for e in entity_ids]
                            nodes.append(node)
                            labels.append(seq)
                            rows.append(offset - 1)
                        ids = sorted(present, key=lambda e: (kind_of(e) or "", seq_of(e)))
                        persons = sorted({self.person_of(e) for e in ids} - {None}, key=seq_of)
                        clip_rows.append((clip, ids + persons))
                    conn.executemany(
                        "INSERT INTO clips(clip_index, start_ns, end_ns, stored_ns, entity_ids, keyframe_jpeg)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        [
                            (c.clip_index, c.start_ns, c.end_ns, stored_ns, json.dumps(ids), c.keyframe_jpeg or None)
                            for c, ids in clip_rows
                        ],
                    )
                    conn.executemany(
                        "INSERT INTO text_nodes(node_id, seq, kind, text, clip_index, start_ns, end_ns, weight,"
                        " embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        node_rows,
                    )
                    conn.executemany("INSERT OR IGNORE INTO edges(node_id, entity_id) VALUES (?, ?)", edge_rows)
                    if nodes:
                        conn.execute("INSERT OR REPLACE INTO counters(name, value) VALUES ('text', ?)", (seq,))
                    for clip, ids in clip_rows:
                        self.clips[clip.clip_index] = {
                            "start_ns": clip.start_ns,
                            "end_ns": clip.end_ns,
                            "stored_ns": stored_ns,
                            "entity_ids": ids,
                            "episodic": [],
                            "semantic": [],
                        }
                    for node in nodes:
                        self._cache_text(node)
                        self.clips[node.clip_index]["episodic"].append(node.node_id)
                        self.node_clips[node.node_id] = [node.clip_index]
                    if nodes:
                        self.text_index.add(labels, vectors[rows])
            except BaseException:
                self._load()  # the caches may hold part of the failed batch: rebuild them from the store
                raise
            return len(nodes)

    def _apply(self, conn, clip, mapped, output, draft_vectors, new_entities) -> ClipOutcome:
        if self.store.get_meta("text_dim") is None:
            conn.execute("INSERT INTO meta(key, value) VALUES ('text_dim', ?)", (str(self.text_dim),))
        outcome = ClipOutcome(clip.clip_index)
        conn.execute(
            "INSERT INTO clips(clip_index, start_ns, end_ns, stored_ns, keyframe_jpeg) VALUES (?, ?, ?, ?, ?)",
            (clip.clip_index, clip.start_ns, clip.end_ns, time.time_ns(), clip.keyframe_jpeg or None),
        )
        self.clips[clip.clip_index] = {
            "start_ns": clip.start_ns,
            "end_ns": clip.end_ns,
            "stored_ns": time.time_ns(),
            "entity_ids": [],
            "episodic": [],
            "semantic": [],
        }
        if output.degraded:
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                (f"{DEGRADED_PREFIX}{clip.clip_index}", output.degraded),
            )
        for perception_id in new_entities:
            created = self._create_entity(conn, kind_of(perception_id), clip.clip_index)
            if mapped.get(perception_id, created) != created:
                raise RuntimeError(
                    f"entity id prediction failed for {perception_id}: {mapped[perception_id]} != {created}"
                )
            mapped[perception_id] = created
            self.session_map[perception_id] = created
        self._observe_entities(conn, clip, mapped)
        for id1, id2, confidence, count in output.equivalences:
            merged = self._record_match(conn, id1, id2, confidence, count, clip)
            if merged:
                outcome.merges.append(merged)
        for entity_id, name in output.names:
            self._vote_name(conn, entity_id, name)
        for draft, vector in zip(output.drafts, draft_vectors, strict=True):
            self._add_memory(conn, draft, vector, clip.clip_index, outcome)
        present = sorted({mapped[p] for p in mapped}, key=lambda e: (kind_of(e) or "", seq_of(e)))
        persons = sorted({self.person_of(e) for e in present} - {None}, key=seq_of)
        outcome.entity_ids = present + persons
        self.clips[clip.clip_index]["entity_ids"] = outcome.entity_ids
        conn.execute(
            "UPDATE clips SET entity_ids=? WHERE clip_index=?", (json.dumps(outcome.entity_ids), clip.clip_index)
        )
        return outcome

    def _create_entity(self, conn, kind: str, clip_index: int) -> str:
        """A new face/voice entity and its own new person (persons merge later on evidence)."""
        seq = self.store.next_counter(conn, kind)
        entity_id = f"{kind}_{seq}"
        person_seq = self.store.next_counter(conn, KIND_PERSON)
        person_id = f"person_{person_seq}"
        for eid, eseq, ekind, person in ((person_id, person_seq, KIND_PERSON, ""), (entity_id, seq, kind, person_id)):
            conn.execute(
                "INSERT INTO entities(entity_id, seq, kind, person_id, first_clip, last_clip)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (eid, eseq, ekind, person, clip_index, clip_index),
            )
            self.entities[eid] = EntityRecord(
                eid, eseq, ekind, person_id=person, first_clip=clip_index, last_clip=clip_index
            )
        return entity_id

    def _observe_entities(self, conn, clip: ClipEvidence, mapped: dict[str, str]) -> None:
        """Counts, times, embedding samples and the best crop of every face/voice seen in the clip."""
        observations: dict[str, list] = {}
        for face in clip.faces:
            observations.setdefault(mapped[face.face_id], []).append(("face", face))
        for voice in clip.voices:
            observations.setdefault(mapped[voice.voice_id], []).append(("voice", voice))
        for entity_id, items in observations.items():
            record = self.entities[entity_id]
            stamps = [item.stamp_ns if kind == "face" else item.start_ns for kind, item in items]
            ends = [item.stamp_ns if kind == "face" else item.end_ns for kind, item in items]
            if record.observation_count == 0:
                record.first_ns, record.first_clip = min(stamps), clip.clip_index
            record.observation_count += len(items)
            record.last_ns, record.last_clip = max(ends), clip.clip_index
            limit = self.config.max_face_embeddings if record.kind == KIND_FACE else self.config.max_voice_embeddings
            samples = self.entity_samples.setdefault(entity_id, [])
            new_samples = [usable_embedding(item.embedding) for _, item in items]
            new_samples = [v for v in new_samples if v is not None]
            dims = {s.shape[0] for s in samples}
            new_samples = [s for s in new_samples if not dims or s.shape[0] in dims]
            changed = False
            for vector in new_samples:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
                if len(samples) < limit:
                    samples.append(vector)
                else:  # deterministic replacement (the reference samples at random): rotate slots
                    samples[record.observation_count % limit] = vector
                changed = True
            if changed:
                conn.execute("DELETE FROM entity_embeddings WHERE entity_id=?", (entity_id,))
                conn.executemany(
                    "INSERT INTO entity_embeddings(entity_id, slot, embedding) VALUES (?, ?, ?)",
                    [(entity_id, slot, vector_to_blob(v)) for slot, v in enumerate(samples)],
                )
                self._index_entity(entity_id)
            best = None
            for kind, item in items:
                if kind == "face" and item.crop_jpeg:
                    score = float(item.score) * (1.0 + float(item.quality))
                    if score > record.crop_score and (best is None or score > best[0]):
                        best = (score, item.crop_jpeg)
            if best is not None:
                record.crop_score = best[0]
                conn.execute(
                    "UPDATE entities SET crop_score=?, crop_jpeg=? WHERE entity_id=?", (best[0], best[1], entity_id)
                )
            conn.execute(
                "UPDATE entities SET observation_count=?, first_clip=?, last_clip=?, first_ns=?, last_ns=?"
                " WHERE entity_id=?",
                (
                    record.observation_count,
                    record.first_clip,
                    record.last_clip,
                    record.first_ns,
                    record.last_ns,
                    entity_id,
                ),
            )
            person = self.entities[self.resolve(record.person_id)]
            if person.first_clip < 0 or person.observation_count == 0:
                person.first_clip, person.first_ns = record.first_clip, record.first_ns
            person.observation_count += len(items)
            person.last_clip, person.last_ns = clip.clip_index, max(person.last_ns, record.last_ns)
            self._save_entity(conn, person)

    def _save_entity(self, conn, record: EntityRecord) -> None:
        conn.execute(
            "UPDATE entities SET name=?, person_id=?, observation_count=?, first_clip=?, last_clip=?, first_ns=?,"
            " last_ns=?, name_votes=? WHERE entity_id=?",
            (
                record.name,
                record.person_id,
                record.observation_count,
                record.first_clip,
                record.last_clip,
                record.first_ns,
                record.last_ns,
                json.dumps(record.name_votes, sort_keys=True),
                record.entity_id,
            ),
        )

    def _record_match(self, conn, id1: str, id2: str, confidence: float, count: int, clip: ClipEvidence):
        """Store match evidence; unite the two persons when it is strong and unambiguous.

        A voice unites with a face only when each is the other's strongest match (the reference keeps
        a voice's strongest face and breaks ties at random; here ties go to the lower id) and neither
        person already has a member of the other kind: evidence alone never collapses two humans
        who were both seen and heard into one person."""
        id1, id2 = self.resolve(id1), self.resolve(id2)
        if id1 not in self.entities or id2 not in self.entities or id1 == id2:
            return None
        a, b = sorted((id1, id2))
        old = self.evidence.get((a, b), (0.0, 0))
        confidence, count = max(confidence, old[0]), max(int(count), old[1])
        self.evidence[(a, b)] = (confidence, count)
        conn.execute(
            "INSERT OR REPLACE INTO evidence(id1, id2, kind, confidence, evidence_count, clip_index, stamp_ns)"
            " VALUES (?, ?, 'match', ?, ?, ?, ?)",
            (a, b, confidence, count, clip.clip_index, clip.end_ns),
        )
        if confidence < self.config.equivalence_min_confidence or count < self.config.equivalence_min_evidence:
            return None
        pa, pb = self.person_of(a), self.person_of(b)
        if pa is None or pb is None or pa == pb:
            return None
        kinds = {kind_of(a), kind_of(b)}
        if kinds == {KIND_FACE, KIND_VOICE}:
            face, voice = (a, b) if kind_of(a) == KIND_FACE else (b, a)
            if self._best_match(voice, KIND_FACE) != face or self._best_match(face, KIND_VOICE) != voice:
                return None
            face_person_kinds = {kind_of(m) for m in self.members_of(self.person_of(face))}
            voice_person_kinds = {kind_of(m) for m in self.members_of(self.person_of(voice))}
            if KIND_VOICE in face_person_kinds or KIND_FACE in voice_person_kinds:
                return None
        return self._merge_persons(conn, pa, pb, clip.clip_index)

    def _best_match(self, entity_id: str, other_kind: str) -> str | None:
        """Strongest evidence partner of the other kind: most evidence, then confidence, then lowest id."""
        best = None
        for (a, b), (confidence, count) in self.evidence.items():
            if entity_id not in (a, b):
                continue
            other = b if a == entity_id else a
            if kind_of(other) != other_kind:
                continue
            key = (count, confidence, -seq_of(other))
            if best is None or key > best[0]:
                best = (key, other)
        return None if best is None else best[1]

    def _merge_persons(self, conn, pa: str, pb: str, clip_index: int) -> tuple[str, str]:
        """The older person survives (ids never change once published); the other becomes an alias."""
        keep, gone = sorted((pa, pb), key=seq_of)
        survivor, loser = self.entities[keep], self.entities.pop(gone)
        conn.execute("DELETE FROM entities WHERE entity_id=?", (gone,))
        conn.execute(
            "INSERT OR REPLACE INTO aliases(old_id, new_id, clip_index, reason) VALUES (?, ?, ?, 'equivalence')",
            (gone, keep, clip_index),
        )
        conn.execute("UPDATE aliases SET new_id=? WHERE new_id=?", (keep, gone))
        for old, new in list(self.aliases.items()):
            if new == gone:
                self.aliases[old] = keep
        self.aliases[gone] = keep
        for record in self.entities.values():
            if record.person_id == gone:
                record.person_id = keep
        conn.execute("UPDATE entities SET person_id=? WHERE person_id=?", (keep, gone))
        for name, votes in loser.name_votes.items():
            survivor.name_votes[name] = survivor.name_votes.get(name, 0) + votes
        survivor.name = self._winning_name(survivor)
        survivor.observation_count += loser.observation_count
        if loser.first_clip >= 0 and (survivor.first_clip < 0 or loser.first_clip < survivor.first_clip):
            survivor.first_clip, survivor.first_ns = loser.first_clip, loser.first_ns
        survivor.last_clip = max(survivor.last_clip, loser.last_clip)
        survivor.last_ns = max(survivor.last_ns, loser.last_ns)
        self._save_entity(conn, survivor)
        if gone in self.entity_memories:
            self.entity_memories.setdefault(keep, []).extend(self.entity_memories[gone])
        return gone, keep

    @staticmethod
    def _winning_name(record: EntityRecord) -> str:
        """Most-voted name; a tie keeps the current name (names do not flicker)."""
        if not record.name_votes:
            return record.name
        top = max(record.name_votes.values())
        if record.name and record.name_votes.get(record.name, 0) == top:
            return record.name
        return min(name for name, votes in record.name_votes.items() if votes == top)

    def _vote_name(self, conn, entity_id: str, name: str) -> None:
        person_id = self.person_of(entity_id)
        if person_id is None or not name:
            return
        person = self.entities[person_id]
        person.name_votes[name] = person.name_votes.get(name, 0) + 1
        person.name = self._winning_name(person)
        self._save_entity(conn, person)

    def _add_memory(self, conn, draft: MemoryDraft, vector: np.ndarray, clip_index: int, outcome: ClipOutcome) -> None:
        """Insert a memory; a semantic memory close to one about the same entities reinforces it instead."""
        entity_ids = [e for e in tags_in(draft.text) if self.resolve(e) in self.entities]
        if draft.kind == KIND_EPISODIC:
            for node_id in self.clips[clip_index]["episodic"]:
                if self.text[node_id].text == draft.text:
                    return  # the same event twice in one clip: stored once
            for node_id in self.entity_memories.get(entity_ids[0], []) if entity_ids else []:
                node = self.text[node_id]
                if (node.kind, node.text, node.start_ns, node.end_ns) == (
                    KIND_EPISODIC,
                    draft.text,
                    draft.start_ns,
                    draft.end_ns,
                ):
                    return  # a replayed event (same text, same stream times): stored once
        else:
            about = self.person_set(entity_ids)
            reinforced = False
            for node_id in self._semantic_candidates(about):
                existing = self.semantic_vectors[node_id]
                node = self.text[node_id]
                if self.person_set(node.entity_ids) != about:
                    continue
                cosine = float(np.dot(existing, vector))
                if cosine > self.config.reinforce_threshold:
                    self._reweigh(conn, node, +1.0, clip_index)
                    if node_id not in outcome.semantic:
                        outcome.semantic.append(node_id)
                    reinforced = True
                elif cosine < self.config.weaken_threshold:
                    self._reweigh(conn, node, -1.0, clip_index)
                    outcome.weakened.append(node_id)
            if reinforced:
                return
        seq = self.store.next_counter(conn, "text")
        node = TextNode(
            f"{draft.kind}_{seq}",
            seq,
            draft.kind,
            draft.text,
            clip_index,
            draft.start_ns,
            draft.end_ns,
            1.0,
            entity_ids,
        )
        conn.execute(
            "INSERT INTO text_nodes(node_id, seq, kind, text, clip_index, start_ns, end_ns, weight, embedding)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                node.node_id,
                seq,
                node.kind,
                node.text,
                clip_index,
                node.start_ns,
                node.end_ns,
                1.0,
                vector_to_blob(vector),
            ),
        )
        conn.executemany(
            "INSERT OR IGNORE INTO edges(node_id, entity_id) VALUES (?, ?)", [(node.node_id, e) for e in entity_ids]
        )
        self._cache_text(node)
        self.text_index.add([seq], vector[None, :])
        if node.kind == KIND_SEMANTIC:
            self.semantic_vectors[node.node_id] = vector
            conn.execute(
                "INSERT INTO node_clips(node_id, clip_index, delta) VALUES (?, ?, 1)", (node.node_id, clip_index)
            )
            self.clips[clip_index]["semantic"].append(node.node_id)
            self.node_clips[node.node_id] = [clip_index]
            outcome.semantic.append(node.node_id)
        else:
            self.clips[clip_index]["episodic"].append(node.node_id)
            self.node_clips[node.node_id] = [clip_index]
            outcome.episodic.append(node.node_id)

    def _semantic_candidates(self, about: frozenset[str]) -> list[str]:
        """Semantic memories that may be about the same entities: those linked to one of them (all
        entity-free ones when `about` is empty), in creation order. Keeps reinforcement off O(N)."""
        if not about:
            return [n for n, _ in self.semantic_vectors.items() if not self.text[n].entity_ids]
        ids: set[str] = set()
        for entity_id in about:
            for linked in (entity_id, *self.aliases_of(entity_id), *self.members_of(entity_id)):
                ids.update(n for n in self.entity_memories.get(linked, []) if n in self.semantic_vectors)
        return sorted(ids, key=lambda n: self.text[n].seq)

    def _reweigh(self, conn, node: TextNode, delta: float, clip_index: int) -> None:
        node.weight += delta
        conn.execute("UPDATE text_nodes SET weight=? WHERE node_id=?", (node.weight, node.node_id))
        conn.execute(
            "INSERT INTO node_clips(node_id, clip_index, delta) VALUES (?, ?, ?)"
            " ON CONFLICT(node_id, clip_index) DO UPDATE SET delta = delta + excluded.delta",
            (node.node_id, clip_index, delta),
        )
        if delta > 0 and node.node_id not in self.clips[clip_index]["semantic"]:
            self.clips[clip_index]["semantic"].append(node.node_id)
            self.node_clips.setdefault(node.node_id, []).append(clip_index)
