"""Search API: the logic behind search_node, search_clip, get_entity and get_stats.

Every bad input raises MemoryApiError with the service's error code, so the node only copies
code and message into the response.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.memory_graph import MemoryGraph
from m3_memory.graph.records import (
    ALL_KINDS,
    ENTITY_KINDS,
    KIND_FACE,
    KIND_SEMANTIC,
    KIND_VOICE,
    TEXT_KINDS,
    ClipEvidence,
    ClipRecord,
    TextNode,
)
from m3_memory.graph.tags import TAG_RE
from m3_memory.search.embedder import TextEmbedder
from m3_memory.search.entity_search import EntitySearchMixin, check_embedding
from m3_memory.search.entity_view import entity_names, entity_view, graph_stats
from m3_memory.search.fleet import FleetSearch
from m3_memory.search.heard import heard_records
from m3_memory.search.locate import Located, locate, object_labelled, person_named
from m3_memory.search.query_expansion import QueryExpansionMixin
from m3_memory.search.request_checks import check_limits, check_query, check_top_k
from m3_memory.search.search_types import ClipQuery, EntityView, SearchConfig, SearchHit, Stats
from m3_memory.search.where import (
    NOWHERE,
    REGION_BONUS,
    Where,
    exact_scores,
    region_named,
    where_of,
)

__all__ = ["EntityView", "MemorySearch", "SearchConfig", "SearchHit", "Stats", "check_embedding"]

# A memory whose statement a newer one replaced (graph/fact_changes.py) ranks this much lower [cosine]: below
# the memory that replaced it when both match the query about as well, still found when only it matches.
SUPERSEDED_PENALTY = 0.1


class MemorySearch(QueryExpansionMixin, EntitySearchMixin):
    """Read side of the memory; safe to call from many threads while clips are being written."""

    def __init__(self, graph: MemoryGraph, embedder: TextEmbedder, config: SearchConfig | None = None) -> None:
        self.graph = graph
        self.embedder = embedder
        self.config = config or SearchConfig()
        self._conversations: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._conv_lock = threading.Lock()
        self.fleet = FleetSearch(graph, self.config.robot_id, self.render_tags)
        # Clips heard and not memorized yet (search/heard.py); the memory node sets this to its open window
        # and its memorizer backlog.
        self.unstored: Callable[[], list[ClipEvidence]] = list

    def _text_hits(
        self, vectors: np.ndarray, k: int, kinds: set[str], before_clip: int, before_stamp_ns: int,
        where: Where = NOWHERE, named: Where | None = None,
    ) -> list[tuple[str, float]]:  # fmt: skip
        """Best text nodes (node_id, cosine) over all query variants, filtered. named: the window of a region the
        query names (search.where.region_named), whose memories rank REGION_BONUS higher."""
        graph = self.graph

        def passes(node: TextNode) -> bool:
            if node.kind not in kinds:
                return False
            if node.kind == KIND_SEMANTIC and node.weight <= 0:
                return False  # weakened to nothing: no longer believed
            if before_clip >= 0 and node.clip_index > before_clip:
                return False
            if before_stamp_ns > 0 and node.start_ns > before_stamp_ns:
                return False
            return where.keeps(node)

        def keep(label: int) -> bool:
            node = graph.text.get(graph.text_by_seq.get(label, ""))
            return node is not None and passes(node)

        def in_named(label: int) -> bool:
            return named is not None and named.keeps(graph.text[graph.text_by_seq[label]])

        best = exact_scores(graph, where, before_stamp_ns, passes, vectors, k) if where.active else None
        if best is None:
            best = {}
            for vector in vectors:
                for label, score in graph.text_index.search(vector, k, keep):
                    node_id = graph.text_by_seq[label]
                    best[node_id] = max(best.get(node_id, -2.0), score)
        if named is not None:  # the query names a region: memories made there rank higher (and are found)
            found = exact_scores(graph, named, before_stamp_ns, lambda n: passes(n) and named.keeps(n), vectors, k)
            if found is None:  # a region holding more memories than exact scoring takes: the index, filtered to it
                found = {}
                for vector in vectors:
                    for label, score in graph.text_index.search(vector, k, lambda lb: keep(lb) and in_named(lb)):
                        node_id = graph.text_by_seq[label]
                        found[node_id] = max(found.get(node_id, -2.0), score)
            for node_id, score in found.items():
                best[node_id] = max(best.get(node_id, -2.0), score + REGION_BONUS)
        for node_id in best:  # a statement replaced by then ranks below the one that replaced it
            if graph.text[node_id].known_at(before_stamp_ns).superseded_by:
                best[node_id] -= SUPERSEDED_PENALTY
        return sorted(best.items(), key=lambda item: (-item[1], graph.text[item[0]].seq))[:k]

    # -- search_node ------------------------------------------------------------------------------
    def search_node(
        self,
        query: str = "",
        kinds: list[str] | None = None,
        top_k: int | None = None,
        before_clip: int = -1,
        before_stamp_ns: int = 0,
        face_embedding=None,
        voice_embedding=None,
        robot_id: str = "",
        where: Where = NOWHERE,
    ) -> list[SearchHit]:
        """Text query → memories (and entities named in it); face/voice embedding → nearest entities.
        robot_id: whose text memories (m3_memory.search.fleet); entities are the fleet's people.
        where: a time and place window (MemorySearch.where); entities pass only its time window."""
        has_face = face_embedding is not None and len(face_embedding) > 0
        has_voice = voice_embedding is not None and len(voice_embedding) > 0
        query = check_query(query, self.config.max_query_chars, required=not (has_face or has_voice))
        top_k = check_top_k(self.config.default_top_k if top_k is None else top_k)
        kinds = list(kinds or [])
        unknown = [k for k in kinds if k not in ALL_KINDS]
        if unknown:
            raise MemoryApiError(errors.INVALID_ARGUMENT, f"unknown kind(s) {unknown}; use {list(ALL_KINDS)}")
        check_limits(before_clip, before_stamp_ns)
        scope = self._scope(robot_id, where)
        wanted = set(kinds or ALL_KINDS)
        hits: list[SearchHit] = []
        if has_face:
            hits += self._entity_neighbours(
                face_embedding, KIND_FACE, errors.INVALID_IMAGE, top_k, before_clip, before_stamp_ns
            )
        if has_voice:
            hits += self._entity_neighbours(
                voice_embedding, KIND_VOICE, errors.INVALID_AUDIO, top_k, before_clip, before_stamp_ns
            )
        if query:
            respelled = self.respelled(query)  # once, for the text variants and the names
            text_kinds = wanted & set(TEXT_KINDS)
            if text_kinds:
                vectors = self.embedder.embed(self.query_variants(query, respelled))
                with self.graph.lock:
                    if scope.local:
                        named = region_named(self.graph.regions, query, where)
                        local = self._text_hits(vectors, top_k, text_kinds, before_clip, before_stamp_ns, where, named)
                        hits += [
                            self._hit(self.graph.text[node_id].known_at(before_stamp_ns), score)
                            for node_id, score in local
                        ]
                hits += self.fleet.node_hits(scope, vectors, top_k, text_kinds, before_clip, before_stamp_ns, where)
            if wanted & set(ENTITY_KINDS):
                hits += self._entities_named(respelled, wanted, before_clip, before_stamp_ns)
        if kinds:
            hits = [h for h in hits if h.kind in wanted]
        if where.active:  # entities have no place; they pass a time window they were observed in
            hits = [h for h in hits if h.kind in TEXT_KINDS or (not where.has_place and h.end_ns >= where.after_ns)]
        hits.sort(key=lambda h: -h.score)
        hits = hits[:top_k]
        names = self.get_names([i for hit in hits for i in hit.entity_ids])
        for hit in hits:
            hit.entity_names = [names.get(i, "") for i in hit.entity_ids]
        return hits

    def _hit(self, node: TextNode, score: float) -> SearchHit:
        return SearchHit(
            node.node_id, node.kind, node.text, node.clip_index, node.start_ns, node.end_ns,
            list(node.entity_ids), node.weight, score, self.fleet.own, node.place, node.valid_until_ns,
            node.superseded_by,
        )  # fmt: skip

    def where(self, after_ns: int = 0, region: str = "", x: float = 0.0, y: float = 0.0, radius_m: float = 0.0):
        """A request's time and place window, checked against this memory's regions (search.where)."""
        return where_of(self.graph.regions, after_ns, region, x, y, radius_m)

    def _scope(self, robot_id: str, where: Where):
        """The request's robots; other robots' memories pass a place window by their places' columns in
        Milvus, which collections made before places lack (then only this robot's are searched by place)."""
        scope = self.fleet.scope(robot_id)
        if where.has_place and scope.remote and not self.fleet.reader.places:
            raise MemoryApiError(
                errors.INVALID_ARGUMENT,
                f"a place filter searches one robot's memories here (the Milvus collection was made before "
                f"memories had place columns): set robot_id to {self.fleet.own!r} (this robot)",
            )
        return scope

    # -- search_clip ------------------------------------------------------------------------------
    def search_clip(
        self,
        query: str,
        top_k: int | None = None,
        threshold: float | None = None,
        before_clip: int = -1,
        conversation_id: str = "",
        before_stamp_ns: int = 0,
        robot_id: str = "",
        where: Where = NOWHERE,
    ) -> list[ClipRecord]:
        """Reference search_clip: a clip scores its best memory's cosine to the (alias-expanded) query;
        clips at or above threshold, index <= before_clip, best first, each with all its memories
        (only those started by before_stamp_ns when that limit is set). robot_id: whose clips
        (m3_memory.search.fleet: "" = every robot sharing this memory)."""
        query = check_query(query, self.config.max_query_chars, required=True)
        top_k = check_top_k(self.config.clip_top_k if top_k is None else top_k)
        threshold = self.config.clip_threshold if threshold is None else float(threshold)
        if not (math.isfinite(threshold) and -1.0 <= threshold <= 1.0):
            raise MemoryApiError(errors.INVALID_ARGUMENT, f"threshold must be in [-1, 1], got {threshold}")
        check_limits(before_clip, before_stamp_ns)
        scope = self._scope(robot_id, where)
        vectors = self.embedder.embed(self.query_variants(query))
        request = ClipQuery(
            vectors, top_k, threshold, before_clip, before_stamp_ns, self._conversation(conversation_id), where,
            region_named(self.graph.regions, query, where),
        )  # fmt: skip
        records = self._local_clips(request) + self._heard(request) if scope.local else []
        records = sorted(records, key=lambda r: -r.score)[:top_k]  # stable: stored before heard at a tie
        if scope.remote:
            records += self.fleet.clip_records(scope, request)
            records = sorted(records, key=lambda r: (-r.score, r.robot_id != self.fleet.own, r.robot_id))[:top_k]
        self._named(records)
        return records

    def _named(self, records: list[ClipRecord]) -> None:
        """Each clip's names of the entities its memories name, in one lookup for the whole answer. Why:
        the control loop names every id it retrieves, and over the services a lookup is a ROS call."""
        named = [{i for n in r.episodic + r.semantic for i in n.entity_ids} for r in records]
        names = self.get_names(sorted(set().union(*named)))
        for record, ids in zip(records, named, strict=True):
            record.names = {i: names.get(i, "") for i in ids}

    def _heard(self, request: ClipQuery) -> list[ClipRecord]:
        """search_clip over the lines heard and not memorized yet (search/heard.py), tags rendered."""
        clips = self.unstored()
        if not clips:
            return []
        with self.graph.lock:
            stored, ids = set(self.graph.clips), dict(self.graph.session_map)
        records = heard_records(
            clips, ids, self.embedder.embed, request.vectors, request.threshold, request.before_clip,
            request.before_stamp_ns, request.where, stored,
        )  # fmt: skip
        for record in records:
            record.robot_id = self.fleet.own  # heard by this robot, as its stored clips are
            record.episodic = [replace(n, text=self.render_tags(n.text, request.labels)) for n in record.episodic]
        return records

    def _local_clips(self, request: ClipQuery) -> list[ClipRecord]:
        """search_clip over this robot's graph in RAM."""
        vectors, top_k, threshold, labels = request.vectors, request.top_k, request.threshold, request.labels
        before_clip, before_stamp_ns = request.before_clip, request.before_stamp_ns
        graph = self.graph
        with graph.lock:
            total = len(graph.text)
            fetch = min(total, max(50, top_k * 20))
            scores: dict[int, float] = {}
            while fetch > 0:
                hits = self._text_hits(
                    vectors, fetch, set(TEXT_KINDS), before_clip, before_stamp_ns, request.where, request.named
                )
                scores = {}
                for node_id, score in hits:
                    for clip_index in graph.node_clips.get(node_id, []):
                        started = before_stamp_ns <= 0 or graph.clips[clip_index]["start_ns"] <= before_stamp_ns
                        if started and (before_clip < 0 or clip_index <= before_clip):
                            scores[clip_index] = max(scores.get(clip_index, -2.0), score)
                above = [c for c, s in scores.items() if s >= threshold]
                exhausted = len(hits) < fetch or fetch >= total
                if len(above) >= top_k or exhausted or (hits and hits[-1][1] < threshold):
                    break
                fetch = min(total, fetch * 4)
            ranked = sorted(((s, c) for c, s in scores.items() if s >= threshold), key=lambda sc: (-sc[0], sc[1]))
            records = [self.clip_record(c, score=s, vectors=vectors, labels=labels) for s, c in ranked[:top_k]]
        if before_stamp_ns > 0:
            records = [record.started_by(before_stamp_ns) for record in records]
        return records

    def clip_record(
        self,
        clip_index: int,
        score: float = 0.0,
        vectors: np.ndarray | None = None,
        labels: dict[str, str] | None = None,
    ) -> ClipRecord:
        """A stored clip with copies of all its memories: scored against vectors when given, and with
        entity tags rendered as names (self.render_tags) when labels is given."""
        graph = self.graph
        with graph.lock:
            clip = graph.clips[clip_index]

            def copied(node_id: str) -> TextNode:
                node = graph.text[node_id]
                text = node.text if labels is None else self.render_tags(node.text, labels)
                return replace(node, text=text, entity_ids=list(node.entity_ids))

            record = ClipRecord(
                clip_index,
                clip["start_ns"],
                clip["end_ns"],
                clip["stored_ns"],
                [copied(n) for n in clip["episodic"]],
                [copied(n) for n in clip["semantic"]],
                list(clip["entity_ids"]),
                score,
                robot_id=self.fleet.own,
            )
            if vectors is not None:
                nodes = [n for n in record.episodic + record.semantic if n.seq in graph.text_index]
                stored = graph.text_index.vectors([n.seq for n in nodes])  # one lookup for the whole clip
                best = (stored @ vectors.T).max(axis=1) if len(nodes) else []
                record.node_scores = {n.node_id: float(s) for n, s in zip(nodes, best, strict=True)}
            return record

    def _conversation(self, conversation_id: str) -> dict[str, str]:
        if not conversation_id:
            return {}
        with self._conv_lock:
            labels = self._conversations.pop(conversation_id, {})
            self._conversations[conversation_id] = labels
            while len(self._conversations) > self.config.max_conversations:
                self._conversations.popitem(last=False)
            return labels

    def render_tags(self, text: str, labels: dict[str, str]) -> str:
        """Entity tags rewritten as person names (or <person_k> when unnamed). Within one
        conversation (labels) a tag keeps the rendering it was first given, even if a name is learnt later."""
        if "<" not in text:
            return text

        def label(match: re.Match) -> str:
            tag = match.group(1)
            if tag not in labels:
                person = self.graph.person_of(tag)
                name = self.graph.entities[person].name if person else ""
                labels[tag] = name or f"<{person or tag}>"
            return labels[tag]

        with self.graph.lock, self._conv_lock:  # graph first, as clip_record holds it: one lock order
            return TAG_RE.sub(label, text)

    # -- get_entity / get_stats -------------------------------------------------------------------
    def locate_entity(
        self, entity_id: str = "", name: str = "", before_ns: int = 0, limit: int = 1, label: str = ""
    ) -> Located:
        """Where and when an entity, the person with a learnt name, or the object of a class seen last, was
        last seen or heard (search.locate); the first of entity_id, name and label given decides."""
        check_limits(-1, before_ns)
        if not entity_id.strip():
            if name.strip():
                entity_id = person_named(self.graph, self.respelled(name.strip()))
            elif label.strip():
                entity_id = object_labelled(self.graph, label, before_ns)
            else:
                raise MemoryApiError(errors.EMPTY_QUERY, "give an entity_id, a name or an object's label")
        return locate(self.graph, entity_id, before_ns, limit)

    def get_entity(self, entity_id: str) -> EntityView:
        return entity_view(self.graph, entity_id)

    def get_names(self, entity_ids: list[str], people: bool = False) -> dict[str, str]:
        return entity_names(self.graph, entity_ids, people)

    def get_stats(self) -> Stats:
        return graph_stats(self.graph)
