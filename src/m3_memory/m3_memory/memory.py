"""The memory as one object: store + graph + embedder + memorizer; what the node and the CLI call.

memory = Memory.open("~/.m3/memory")          # loads MiniLM, rebuilds the indexes
record = memory.ingest(clip_evidence)         # one clip, one transaction; returns the stored ClipRecord
memory.search.search_clip("where are the keys?")
memory.ingest_bulk([(clip, drafts), ...])    # building a large memory: one transaction per batch
"""

from __future__ import annotations

import logging
from typing import Protocol

import numpy as np

from m3_memory.graph.backend import MemoryBackend
from m3_memory.graph.fact_changes import Fact
from m3_memory.graph.memory_graph import GraphConfig, MemorizerOutput, MemoryGraph, usable_embedding
from m3_memory.graph.records import KIND_FACE, KIND_VOICE, ClipEvidence, ClipRecord, LineBefore, MemoryDraft
from m3_memory.graph.things import thing_keys
from m3_memory.memorize.fact_reader import FactReaderError
from m3_memory.memorize.rules import RulesMemorizer
from m3_memory.robot_ids import robot_id_problem
from m3_memory.search.api import MemorySearch, SearchConfig
from m3_memory.search.embedder import TextEmbedder
from m3_memory.store.sqlite_store import MemoryStore

log = logging.getLogger(__name__)


class Memorizer(Protocol):
    """Turns one clip's evidence into memories (rules or a model back-end)."""

    name: str

    def memorize(self, clip: ClipEvidence, ids: dict[str, str], person_of, name_of) -> MemorizerOutput:
        """ids: perception id -> memory id; person_of(memory id): stored person or None; name_of(memory
        id): the learnt name of its person or ""."""
        ...

    def warm_up(self) -> None:
        """Get ready for the first clip (a model back-end has its server read the fixed system prompt
        once, so the first clip does not pay for it); may raise MemorizerUnavailable."""
        ...


class FactReader(Protocol):
    """Reads what a statement states about where a thing is or when an event happens (a model back-end;
    without one the rules of graph/fact_changes read every statement)."""

    def facts(self, text: str) -> list[Fact]:
        """The statement's facts ([] when it states none); raises FactReaderError when it cannot tell."""
        ...


class Memory:
    """Facade over the memory: ingest clips, search, inspect; thread-safe."""

    def __init__(
        self,
        store: MemoryStore | MemoryBackend,
        embedder: TextEmbedder,
        graph_config: GraphConfig | None = None,
        search_config: SearchConfig | None = None,
        memorizer: Memorizer | None = None,
        fact_reader: FactReader | None = None,
    ) -> None:
        """fact_reader: a model reading the statements supersession compares (None: the rules read them)."""
        self.store = store  # the MemoryStore of the SQLite default, else the back-end itself
        self.embedder = embedder
        self.graph = MemoryGraph(store, embedder.dim, graph_config)
        self.memorizer = memorizer or RulesMemorizer(
            self.graph.config.equivalence_min_confidence, self.graph.config.equivalence_min_evidence
        )
        self.search = MemorySearch(self.graph, embedder, search_config)
        self.fact_reader = fact_reader
        self.fact_reader_failures = 0  # statements the model could not read (the rules read them)
        self._last_line: tuple[int, LineBefore] | None = None  # (clip index, its last line with a known voice)

    @classmethod
    def open(
        cls,
        memory_dir: str,
        embedder: TextEmbedder | None = None,
        graph_config: GraphConfig | None = None,
        search_config: SearchConfig | None = None,
        memorizer: Memorizer | None = None,
        fact_reader: FactReader | None = None,
    ) -> Memory:
        """Open (or create) the memory in memory_dir; raises StoreError / SchemaVersionError / ModelMissingError."""
        store = MemoryStore(memory_dir)
        try:
            return cls(store, embedder or TextEmbedder(), graph_config, search_config, memorizer, fact_reader)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Save the text index (large memories then open without rebuilding it) and close the store."""
        try:
            self.graph.save_text_index()
        finally:
            self.graph.backend.close()

    def flush_pending(self) -> int:
        """Write clips the back-end buffered while its storage was away (Milvus), between clips;
        returns how many were written (0 also while the storage is still away)."""
        with self.graph.ingest_lock:
            return self.graph.backend.flush_pending()

    def search_fleet(self, query: str, top_k: int = 10, robot_id: str = "") -> list[dict]:
        """Closest memories of every robot (robot_id "") or of one, straight from Milvus' index, as
        dicts with robot_id and score (the services' fleet search is MemorySearch with robot_id)."""
        search_text = getattr(self.graph.backend, "search_text", None)
        if search_text is None:
            raise ValueError("a fleet search needs memory_backend milvus (this memory is a local SQLite store)")
        if not query.strip():
            raise ValueError("empty query")
        if robot_id and (problem := robot_id_problem(robot_id)):
            raise ValueError(problem)
        return search_text(self.embedder.embed([query])[0], top_k, robot_id)

    def _read_facts(self, drafts, vectors: np.ndarray, clip_index: int) -> dict:
        """What the model reads in the statements supersession compares: the clip's new statements
        (graph.statements_to_read), then the older memories near those that state a fact
        (graph.older_to_read)."""
        readings: dict = {}
        self._read_into(readings, self.graph.statements_to_read(drafts), clip_index)
        self._read_into(readings, self.graph.older_to_read(drafts, vectors, readings), clip_index)
        return readings

    def _read_into(self, readings: dict, texts: list[str], clip_index: int) -> None:
        """readings[text] = what the model reads in it; one it cannot read is left to the rules, and said so."""
        for text in texts:
            try:
                readings[text] = self.fact_reader.facts(text)
            except FactReaderError as error:
                self.fact_reader_failures += 1
                log.warning("clip %d: fact reader: %r not read (%s); the rules read it", clip_index, text[:80], error)

    @property
    def next_clip_index(self) -> int:
        return self.graph.last_clip_index + 1

    def ingest_bulk(
        self, clips: list[tuple[ClipEvidence, list[MemoryDraft]]], vectors: np.ndarray | None = None
    ) -> int:
        """Build a large memory fast: many clips of episodic memories (drafts) in one transaction and
        one batched index insert (MemoryGraph.add_episodic_bulk). Vectors are the drafts' embeddings in
        order; when None, the texts are embedded here in batches. Returns the memories stored."""
        texts = [d.text for _, drafts in clips for d in drafts]
        if vectors is None:
            vectors = self.embedder.embed_batch(texts)
        return self.graph.add_episodic_bulk(clips, vectors)

    @staticmethod
    def _closing_line(clip: ClipEvidence, ids: dict[str, str]) -> tuple[int, LineBefore] | None:
        """The clip's last line, which the next clip's first may answer (None: no line, or its speaker
        uncertain)."""
        said = [v for v in clip.voices if v.transcript.strip()]
        if not said:
            return None
        last = max(said, key=lambda v: (v.end_ns, v.segment_id))
        speaker = ids.get(last.voice_id, "")
        return (clip.clip_index, LineBefore(speaker, last.transcript.strip(), last.end_ns)) if speaker else None

    def ingest(self, clip: ClipEvidence, memorizer: Memorizer | None = None, degraded: str = "") -> ClipRecord | None:
        """Memorise one clip; returns the stored clip (None when it held no evidence).

        memorizer: another one for this clip (a fallback); degraded: why, recorded with the clip."""
        if clip.is_empty():
            return None
        graph = self.graph
        with graph.ingest_lock:
            graph.refresh_people()  # a fleet's people as the other robots left them (else a no-op)
            graph.alias_voices(clip.voice_merges)  # the persons merge in apply_clip, with the clip
            first: dict[str, int] = {}
            embeddings: dict[str, list[np.ndarray]] = {}
            for face in clip.faces:
                first[face.face_id] = min(first.get(face.face_id, face.stamp_ns), face.stamp_ns)
                if (vector := usable_embedding(face.embedding)) is not None:
                    embeddings.setdefault(face.face_id, []).append(vector)
            for voice in clip.voices:
                if not voice.voice_id:  # speaker uncertain: the line is stored, it makes no voice
                    continue
                first[voice.voice_id] = min(first.get(voice.voice_id, voice.start_ns), voice.start_ns)
                if (vector := usable_embedding(voice.embedding)) is not None:
                    embeddings.setdefault(voice.voice_id, []).append(vector)
            mapped: dict[str, str] = {}
            new: list[str] = []
            for perception_id in sorted(first, key=lambda p: (first[p], p)):
                if perception_id.split("_")[0] not in (KIND_FACE, KIND_VOICE):
                    raise ValueError(f"perception ids must be face_N or voice_N, got {perception_id!r}")
                memory_id, is_new = graph.map_entity(perception_id, embeddings.get(perception_id, []))
                if is_new:
                    new.append(perception_id)
                else:
                    mapped[perception_id] = memory_id
            for key in sorted(things := thing_keys(clip), key=lambda k: (things[k], k)):  # objects, text seen
                if key in graph.session_map:  # perception keeps a track's id for the episode: this run's
                    mapped[key] = graph.session_map[key]
                else:
                    new.append(key)
            mapped.update(graph.predict_new_ids(new))
            ids = dict(mapped)
            for match in clip.matches:  # ids seen in earlier clips of this run
                for pid in (match.id1, match.id2):
                    if pid not in ids and pid in graph.session_map:
                        ids[pid] = graph.session_map[pid]
            created = set(mapped[p] for p in new)
            if self._last_line is not None and self._last_line[0] == clip.clip_index - 1:
                clip.line_before = self._last_line[1]
            self._last_line = self._closing_line(clip, ids)
            output = (memorizer or self.memorizer).memorize(
                clip,
                ids,
                lambda e: None if e in created else graph.person_of(e),
                lambda e: "" if e in created else graph.display_name(e),
            )
            output.degraded = degraded
            vectors = (
                self.embedder.embed([d.text for d in output.drafts])
                if output.drafts
                else np.zeros((0, self.embedder.dim), dtype=np.float32)
            )
            readings = self._read_facts(output.drafts, vectors, clip.clip_index) if self.fact_reader else {}
            outcome = graph.apply_clip(clip, mapped, output, vectors, new, readings)
        return self.search.clip_record(outcome.clip_index)
