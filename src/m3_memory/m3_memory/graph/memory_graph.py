"""The memory graph: face / voice / person entities, episodic / semantic text nodes, edges and weights.

The back-end (m3_memory.graph.backend: SQLite by default, or Milvus) is the source of truth; this class
keeps the metadata in RAM (and the vectors in ANN indexes) so that searches never touch storage,
and applies one clip at a time in one back-end transaction. People (faces, voices, merges, names)
are handled in m3_memory.graph.people, text memories in m3_memory.graph.memories.
Every public method is thread-safe: a clip is applied under a lock that searches also take briefly,
so a search sees either none or all of a clip.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from m3_memory.errors import StoreError
from m3_memory.graph.backend import MemoryBackend, StoreWriter
from m3_memory.graph.columns import TextColumns
from m3_memory.graph.fact_changes import Fact
from m3_memory.graph.memories import MemoriesMixin
from m3_memory.graph.people import PeopleMixin, heard_weight, usable_embedding
from m3_memory.graph.records import (
    KIND_EPISODIC,
    KIND_FACE,
    KIND_PERSON,
    KIND_SEMANTIC,
    KIND_VOICE,
    THING_KINDS,
    ClipEvidence,
    EntityRecord,
    MemoryDraft,
    Place,
    Sighting,
    TextNode,
)
from m3_memory.graph.tags import kind_of, perception_kind, seq_of
from m3_memory.graph.things import ThingsMixin
from m3_memory.place.poses import MAX_PATH_SAMPLES, PLACE_TOLERANCE_NS, PoseSample, downsample, pose_on
from m3_memory.place.regions import Regions
from m3_memory.store.ann_index import CosineIndex
from m3_memory.store.sqlite_store import MemoryStore

__all__ = ["DEGRADED_PREFIX", "ClipOutcome", "GraphConfig", "MemorizerOutput", "MemoryGraph", "usable_embedding"]

DEGRADED_PREFIX = "degraded_clip_"  # meta key of a clip a fallback memorizer wrote; its value says why


@dataclass
class GraphConfig:
    """Thresholds of the graph (node parameters; defaults documented in the README)."""

    reinforce_threshold: float = 0.85  # cosine above which a semantic memory reinforces an existing one
    weaken_threshold: float = 0.0  # cosine below which it weakens an existing one about the same entities
    face_match_threshold: float = 0.93  # cosine for a new perception face id to join a stored face (dlib: others 0.88)
    # cosine for a new perception voice id's clip centroid to join a stored voice: CAM++ (the default
    # speaker model) puts one real speaker's utterances >= 0.75 from their centroid and different
    # speakers <= 0.34 (perception README, Speaker model); resemblyzer needs 0.85
    voice_match_threshold: float = 0.6
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


class MemoryGraph(PeopleMixin, ThingsMixin, MemoriesMixin):
    """Entity-centric memory over a MemoryBackend; see module docstring for the locking model."""

    def __init__(self, backend: MemoryBackend | MemoryStore, text_dim: int, config: GraphConfig | None = None) -> None:
        """backend: a MemoryBackend, or a MemoryStore (the SQLite default, wrapped here)."""
        if isinstance(backend, MemoryStore):
            from m3_memory.store.sqlite_backend import SqliteBackend

            backend = SqliteBackend(backend)
        self.backend = backend
        self.text_dim = text_dim
        self.config = config or GraphConfig()
        self.lock = threading.RLock()
        self.ingest_lock = threading.RLock()  # one clip at a time (held across memorize + embed + apply)
        self.session_map: dict[str, str] = {}  # perception id -> memory entity id (this run only)
        self.voice_merges_refused = 0  # perception voice merges of two persons who each have a face
        self.reload_needed = False
        self.regions = Regions.empty()  # named places memories are labelled with (Memory sets the node's file)
        self._load()

    # -- loading --------------------------------------------------------------------------------
    def _load(self) -> None:
        """(Re)build every cache and index from the back-end's snapshot."""
        snap = self.backend.load(self.text_dim)
        with self.lock:
            self.text: dict[str, TextNode] = {}
            self.text_by_seq: dict[int, str] = {}
            self.semantic_vectors: dict[str, np.ndarray] = {}
            self.clips: dict[int, dict] = {}
            self.entities: dict[str, EntityRecord] = {}
            self.aliases: dict[str, str] = dict(snap.aliases)
            self.entity_samples: dict[str, list[np.ndarray]] = snap.entity_samples
            self.entity_memories: dict[str, list[str]] = {}
            self.evidence: dict[tuple[str, str], tuple[float, int]] = snap.evidence
            self.node_clips: dict[str, list[int]] = {}  # semantic node -> clips that created/reinforced it
            self.columns = TextColumns()  # times and places as arrays, for time and place windows
            self.sightings: dict[str, list[Sighting]] = {}  # face/voice id -> its sightings, clip order
            for sighting in snap.sightings:
                self.sightings.setdefault(sighting.entity_id, []).append(sighting)
            self.entity_index: dict[str, CosineIndex] = {}
            for idx, start, end, stored, ids in snap.clips:
                self.clips[idx] = {
                    "start_ns": start, "end_ns": end, "stored_ns": stored, "entity_ids": ids, "episodic": [],
                    "semantic": [],
                }  # fmt: skip
            vectors = snap.text_vectors
            for row, node in enumerate(snap.text_nodes):
                self._cache_text(node)
                if node.kind == KIND_SEMANTIC:
                    self.semantic_vectors[node.node_id] = vectors[row].copy()
                elif node.kind == KIND_EPISODIC:
                    self.clips[node.clip_index]["episodic"].append(node.node_id)
                    self.node_clips[node.node_id] = [node.clip_index]
            self.text_index_loaded = snap.text_index is not None  # True: a saved index, not rebuilt
            if snap.text_index is not None:
                self.text_index = snap.text_index
            else:
                count = len(snap.text_nodes)
                self.text_index = CosineIndex(self.text_dim, capacity=count + 1024 if count else 1024)
                if count:
                    self.text_index.add([node.seq for node in snap.text_nodes], vectors[:count])
            for node_id, clip_index in snap.node_clips:
                self.clips[clip_index]["semantic"].append(node_id)
                self.node_clips.setdefault(node_id, []).append(clip_index)
            for record in snap.entities:
                self.entities[record.entity_id] = record
            for entity_id in self.entity_samples:
                self._index_entity(entity_id)

    def save_text_index(self) -> bool:
        """Let the back-end keep the text index (on close) so large memories open fast."""
        with self.ingest_lock, self.lock:
            if not self.text:
                return False
            nodes = [self.text[self.text_by_seq[seq]] for seq in sorted(self.text_by_seq)]
            return self.backend.save_text_index(self.text_index, nodes)

    def _cache_text(self, node: TextNode) -> None:
        self.columns.add(node)
        self.text[node.node_id] = node
        self.text_by_seq[node.seq] = node.node_id
        for entity_id in node.entity_ids:
            self.entity_memories.setdefault(entity_id, []).append(node.node_id)

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
            return self.resolve(record.person_id) if record.person_id else None  # things have no person

    def members_of(self, person_id: str) -> list[str]:
        """Faces and voices of a person, in creation order (faces first)."""
        with self.lock:
            person_id = self.resolve(person_id)
            members = [
                r
                for r in self.entities.values()
                if r.kind in (KIND_FACE, KIND_VOICE) and self.resolve(r.person_id) == person_id
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
        counters = self.backend.counters()
        out = {}
        for perception_id in perception_ids:
            kind = perception_kind(perception_id)
            counters[kind] = counters.get(kind, 0) + 1
            out[perception_id] = f"{kind}_{self.backend.entity_number(counters[kind])}"
        return out

    def place_at(self, path: list[PoseSample], stamp_ns: int) -> Place | None:
        """Where the robot was at stamp_ns on a clip's path, labelled with its region; None without a pose
        then (no pose topic, or no pose within PLACE_TOLERANCE_NS of that time). A memory's place is the
        one in the middle of what it tells; a sighting's, the one at its last observation."""
        pose = pose_on(path, stamp_ns, PLACE_TOLERANCE_NS)
        if pose is None:
            return None
        region = self.regions.region_of(pose.x, pose.y, pose.frame_id)
        return Place(pose.frame_id, pose.x, pose.y, pose.yaw, region)

    # -- applying one clip ------------------------------------------------------------------------
    def apply_clip(
        self,
        clip: ClipEvidence,
        mapped: dict[str, str],
        output: MemorizerOutput,
        draft_vectors: np.ndarray,
        new_entities: list[str],
        readings: dict[str, list[Fact]] | None = None,
    ) -> ClipOutcome:
        """Write one clip atomically. `mapped` maps perception ids to memory ids ("" = create),
        `new_entities` lists the perception ids to create, in creation order; readings: statement -> the
        facts a model read in it (statements_to_read, older_to_read), for supersession; the rules read every
        other statement."""
        with self.ingest_lock, self.lock:
            if self.reload_needed:  # an earlier failed clip could not be undone then: rebuild first
                self._load()
                self.reload_needed = False
            if clip.clip_index in self.clips:
                raise ValueError(f"clip {clip.clip_index} is already stored")
            try:
                with self.backend.transaction() as writer:
                    outcome = self._apply(writer, clip, mapped, output, draft_vectors, new_entities, readings or {})
            except BaseException:
                try:
                    self._load()  # the caches may hold half of the failed clip: rebuild them from the store
                except StoreError:
                    self.reload_needed = True  # the storage is away (Milvus): rebuild before the next clip
                self.session_map = {k: v for k, v in self.session_map.items() if v in self.entities}
                raise
            return outcome

    def _apply(self, writer: StoreWriter, clip, mapped, output, draft_vectors, new_entities, readings) -> ClipOutcome:
        writer.ensure_text_dim(self.text_dim)
        outcome = ClipOutcome(clip.clip_index)
        writer.add_clip(clip.clip_index, clip.start_ns, clip.end_ns, time.time_ns(), clip.keyframe_jpeg)
        if clip.path:
            writer.add_clip_path(clip.clip_index, downsample(clip.path, MAX_PATH_SAMPLES))
        self.clips[clip.clip_index] = {
            "start_ns": clip.start_ns,
            "end_ns": clip.end_ns,
            "stored_ns": time.time_ns(),
            "entity_ids": [],
            "episodic": [],
            "semantic": [],
        }
        if output.degraded:
            writer.set_meta(f"{DEGRADED_PREFIX}{clip.clip_index}", output.degraded)
        for perception_id in new_entities:
            kind = perception_kind(perception_id)
            if kind in THING_KINDS:
                created = self._create_thing(writer, kind, clip.clip_index)
            else:
                created = self._create_entity(writer, kind, clip.clip_index)
            if mapped.get(perception_id, created) != created:
                raise RuntimeError(
                    f"entity id prediction failed for {perception_id}: {mapped[perception_id]} != {created}"
                )
            mapped[perception_id] = created
            self.session_map[perception_id] = created
        outcome.merges += self._merge_voices(writer, clip)  # perception's revisions, before this clip's evidence
        self._observe_entities(writer, clip, mapped)
        self._observe_things(writer, clip, mapped)
        for id1, id2, confidence, count in output.equivalences:
            merged = self._record_match(writer, id1, id2, confidence, count, clip)
            if merged:
                outcome.merges.append(merged)
        for entity_id, name in output.names:
            self._vote_name(writer, entity_id, name, heard_weight(clip.voices, name))
        for draft, vector in zip(output.drafts, draft_vectors, strict=True):
            place = self.place_at(clip.path, (draft.start_ns + draft.end_ns) // 2)
            self._add_memory(writer, draft, vector, clip.clip_index, outcome, place, readings)
        present = sorted({mapped[p] for p in mapped}, key=lambda e: (kind_of(e) or "", seq_of(e)))
        persons = sorted({self.person_of(e) for e in present} - {None}, key=seq_of)
        outcome.entity_ids = present + persons
        self.clips[clip.clip_index]["entity_ids"] = outcome.entity_ids
        writer.set_clip_entities(clip.clip_index, outcome.entity_ids)
        return outcome
