"""Text memories in the memory graph: episodic and semantic nodes, reinforcement, and bulk building.

A mixin of MemoryGraph (m3_memory.graph.memory_graph), which owns the state these methods read and change;
every change is also handed to the clip's StoreWriter so the back-end stores it with the clip.
"""

from __future__ import annotations

import time

import numpy as np

from m3_memory.graph.backend import StoreWriter
from m3_memory.graph.fact_changes import Fact, facts_of, may_state_fact, supersedes, worth_reading
from m3_memory.graph.records import KIND_EPISODIC, KIND_SEMANTIC, ClipEvidence, MemoryDraft, Place, TextNode
from m3_memory.graph.tags import kind_of, seq_of, tags_in
from m3_memory.place.poses import MAX_PATH_SAMPLES, downsample

FACT_NEIGHBOURS = 50  # older memories a new statement is compared with (its nearest by meaning)
READ_OLDER = 3  # of those, at most this many are read again by a model reader (the nearest first)
READ_UNRULED = 3  # new memories a clip sends a model reader that the rules read no fact in (may_state_fact)


class MemoriesMixin:
    """Adding, reinforcing and weakening text memories; see the module docstring."""

    def _add_memory(
        self, writer: StoreWriter, draft: MemoryDraft, vector: np.ndarray, clip_index: int, outcome,
        place: Place | None = None, readings: dict[str, list[Fact]] | None = None,
    ):  # fmt: skip
        """Insert a memory (at place: where the robot was); a semantic memory close to one about the same
        entities reinforces it instead."""
        entity_ids = [e for e in [*tags_in(draft.text), *draft.things] if self.resolve(e) in self.entities]
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
                    self._reweigh(writer, node, +1.0, clip_index)
                    if node_id not in outcome.semantic:
                        outcome.semantic.append(node_id)
                    reinforced = True
                elif cosine < self.config.weaken_threshold:
                    self._reweigh(writer, node, -1.0, clip_index)
                    outcome.weakened.append(node_id)
            if reinforced:
                return
        seq = writer.next_id("text")
        node = TextNode(
            f"{draft.kind}_{seq}", seq, draft.kind, draft.text, clip_index, draft.start_ns, draft.end_ns, 1.0,
            entity_ids, place,
        )  # fmt: skip
        writer.add_text_nodes([node], vector[None, :])
        self._supersede(writer, node, vector, readings or {})
        self._cache_text(node)
        self.text_index.add([seq], vector[None, :])
        self.node_clips[node.node_id] = [clip_index]
        if node.kind == KIND_SEMANTIC:
            self.semantic_vectors[node.node_id] = vector
            writer.add_node_clip(node.node_id, clip_index, 1.0)
            self.clips[clip_index]["semantic"].append(node.node_id)
            outcome.semantic.append(node.node_id)
        else:
            self.clips[clip_index]["episodic"].append(node.node_id)
            outcome.episodic.append(node.node_id)

    def _supersede(self, writer: StoreWriter, node: TextNode, vector: np.ndarray, readings: dict) -> None:
        """Mark the older memories whose statement this new one replaces ("the keys are now on the shelf",
        "the meeting moved to Friday"; graph/fact_changes.py): they are kept, with when they stopped being
        true and the memory that replaced them. Candidates are the new memory's nearest older memories by
        meaning (two statements about one thing are close), so nothing is indexed at load and a clip costs
        one index search per memory that states a fact. readings: text -> facts a model read before the
        clip was applied (statements_to_read, older_to_read); the rules read every other text."""

        new_facts = readings[node.text] if node.text in readings else facts_of(node.text)
        if not new_facts:
            return
        for old in self._older_near(node.start_ns, vector, node.node_id):
            earlier_facts = readings[old.text] if old.text in readings else facts_of(old.text)
            if any(supersedes(fact, earlier) for fact in new_facts for earlier in earlier_facts):
                old.valid_until_ns, old.superseded_by = node.start_ns, node.node_id
                writer.set_validity(old)

    def _older_near(self, start_ns: int, vector: np.ndarray, node_id: str = "") -> list[TextNode]:
        """The still valid memories that began no later than start_ns, nearest by meaning first."""
        near = []
        for label, _ in self.text_index.search(vector, FACT_NEIGHBOURS):
            old = self.text.get(self.text_by_seq.get(label, ""))
            if old is None or old.superseded_by or old.start_ns > start_ns or old.node_id == node_id:
                continue
            near.append(old)
        return near

    @staticmethod
    def statements_to_read(drafts: list[MemoryDraft]) -> list[str]:
        """The new statements a model reader reads first (memorize/fact_reader.py): each draft the rules
        find a fact in, and up to READ_UNRULED that the rules read nothing in but may state one
        ("the dog leash hangs by the front door": fact_changes.may_state_fact)."""
        ruled, unruled = [], []
        for draft in drafts:
            if facts_of(draft.text):
                ruled.append(draft.text)
            elif may_state_fact(draft.text):
                unruled.append(draft.text)
        return list(dict.fromkeys(ruled + unruled[:READ_UNRULED]))

    def older_to_read(
        self, drafts: list[MemoryDraft], vectors: np.ndarray, readings: dict[str, list[Fact]]
    ) -> list[str]:
        """The older memories a model reader reads next: for each new statement with a fact (the model's
        reading, else the rules'), up to READ_OLDER of its nearest older memories that the rules read as the
        same thing, or read nothing in but that name its thing (fact_changes.worth_reading)."""
        texts: list[str] = []
        with self.lock:
            for draft, vector in zip(drafts, vectors, strict=True):
                new_facts = readings[draft.text] if draft.text in readings else facts_of(draft.text)
                if not new_facts:
                    continue
                near = self._older_near(draft.start_ns, vector)
                older = [old.text for old in near if worth_reading(new_facts, old.text, facts_of(old.text))]
                texts += [text for text in older[:READ_OLDER] if text not in readings]
        return list(dict.fromkeys(texts))

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

    def _reweigh(self, writer: StoreWriter, node: TextNode, delta: float, clip_index: int) -> None:
        node.weight += delta
        writer.set_weight(node)
        writer.add_node_clip(node.node_id, clip_index, delta)
        if delta > 0 and node.node_id not in self.clips[clip_index]["semantic"]:
            self.clips[clip_index]["semantic"].append(node.node_id)
            self.node_clips.setdefault(node.node_id, []).append(clip_index)

    def add_episodic_bulk(self, clips: list[tuple[ClipEvidence, list[MemoryDraft]]], vectors: np.ndarray) -> int:
        """Bulk building of large memories: many clips of episodic memories in ONE transaction and
        one batched index insert. Each clip is new and holds only episodic drafts whose tags name
        known entities; no entity observations, names, matches or superseded facts (use apply_clip for
        those). A repeated text within a clip is stored once; the replay check of apply_clip (same text and
        times in an earlier clip) is skipped, so the caller must not feed the same event twice.
        Returns the number of memories stored; atomic like apply_clip (all of it or none)."""
        total = sum(len(drafts) for _, drafts in clips)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(total, self.text_dim)
        with self.ingest_lock, self.lock:
            indexes = [clip.clip_index for clip, _ in clips]
            if len(set(indexes)) != len(indexes) or any(i in self.clips for i in indexes):
                raise ValueError("bulk clips must be new and distinct")
            clip_rows, nodes, rows = [], [], []
            entity_cache: dict[str, list[str]] = {}
            stored_ns = time.time_ns()
            try:
                with self.backend.transaction() as writer:
                    writer.ensure_text_dim(self.text_dim)
                    seq = self.backend.counters().get("text", 0)
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
                            place = self.place_at(clip.path, (draft.start_ns + draft.end_ns) // 2)
                            nodes.append(
                                TextNode(
                                    f"{KIND_EPISODIC}_{seq}", seq, KIND_EPISODIC, draft.text, clip.clip_index,
                                    draft.start_ns, draft.end_ns, 1.0, entity_ids, place,
                                )
                            )  # fmt: skip
                            rows.append(offset - 1)
                        ids = sorted(present, key=lambda e: (kind_of(e) or "", seq_of(e)))
                        persons = sorted({self.person_of(e) for e in ids} - {None}, key=seq_of)
                        clip_rows.append((clip, ids + persons))
                    writer.add_clips(
                        [(c.clip_index, c.start_ns, c.end_ns, stored_ns, ids, c.keyframe_jpeg) for c, ids in clip_rows]
                    )
                    for clip, _ in clip_rows:
                        if clip.path:
                            writer.add_clip_path(clip.clip_index, downsample(clip.path, MAX_PATH_SAMPLES))
                    writer.add_text_nodes(nodes, vectors[rows])
                    if nodes:
                        writer.set_counter("text", seq)
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
                        self.text_index.add([n.seq for n in nodes], vectors[rows])
            except BaseException:
                self._load()  # the caches may hold part of the failed batch: rebuild them from the store
                raise
            return len(nodes)
