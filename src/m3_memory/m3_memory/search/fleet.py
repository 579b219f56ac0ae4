"""Fleet-wide and per-robot search: what search_clip and search_node do with a request's robot_id.

Scopes (MemorySearch calls FleetSearch.scope first; the services pass the request's robot_id):
- this robot's id: the local search (graph in RAM), as ever;
- "": every robot sharing this memory. In a fleet (memory_backend milvus, fleet_slot > 0) this
  robot's memories come from the local search and every other robot's from Milvus, scored the same
  way (cosine of the alias-expanded query variants), merged by score. SQLite, or Milvus with
  fleet_slot 0 (a robot alone): only this robot exists, the local search;
- another robot's id: that robot's memories, from Milvus; INVALID_ARGUMENT without a fleet.

As-of limits: before_stamp holds for every robot. before_clip counts one robot's clips: a named
robot's clip index; in a fleet search this robot's, and another robot's memories count when they
started by the end of this robot's last stored clip at or before before_clip (the fleet's stream
clocks are taken to be one clock, e.g. ROS time; before_clip beyond this robot's last clip: no limit).

Another robot's memories come with the node id qualified, "<robot_id>/<node_id>" (text memories are
numbered per robot, so ids in one answer never collide), and with robot_id set. Entity ids are the
fleet's (people are shared), so tags render as in the local search.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.memory_graph import MemoryGraph
from m3_memory.graph.records import KIND_EPISODIC, KIND_SEMANTIC, ClipRecord, TextNode
from m3_memory.milvus.fleet import FleetReader, quoted
from m3_memory.milvus.writer import place_of_row
from m3_memory.robot_ids import robot_id_problem
from m3_memory.search.search_types import ClipQuery, SearchHit
from m3_memory.search.where import NOWHERE, Where

PLACE_OVERFETCH = 3  # a place filter asks Milvus for this many times the hits: its box passes more than the shape


def milvus_filter(
    robots: str, kinds: list[str], where: Where = NOWHERE, clip_limit: int = -1, stamp_ns: int = 0
) -> str:
    """The Milvus filter of a search over text rows: robots (an expression on robot_id), kinds, as-of limits
    (clip index, start stamp), the time window and the place window's bounding box (the exact shape is checked
    on the hits: a Milvus filter compares a field with a constant)."""
    parts = [robots, f"kind in {quoted(sorted(kinds))}"]
    if where.after_ns > 0:
        parts.append(f"end_ns >= {int(where.after_ns)}")
    if (box := where.box()) is not None:
        min_x, min_y, max_x, max_y = (f"{v:.6f}" for v in box)
        parts.append(f"place_frame == {json.dumps(where.frame_id)}")
        parts.append(f"place_x >= {min_x} and place_x <= {max_x} and place_y >= {min_y} and place_y <= {max_y}")
    if clip_limit >= 0:
        parts.append(f"clip_index <= {int(clip_limit)}")
    if stamp_ns > 0:
        parts.append(f"start_ns <= {int(stamp_ns)}")
    return " and ".join(p for p in parts if p)


@dataclass(frozen=True)
class Scope:
    """Where a search looks: this robot's graph (local) and/or other robots' rows in Milvus (remote:
    a filter on robot_id, "" = none); named: remote is one robot the request named."""

    local: bool
    remote: str = ""
    named: bool = False


class FleetSearch:
    """The other robots' side of MemorySearch.search_clip / search_node (see the module docstring)."""

    def __init__(self, graph: MemoryGraph, robot_id: str, render_tags: Callable[[str, dict[str, str]], str]) -> None:
        """graph: this robot's; robot_id: the search's configured one (the back-end's wins); render_tags:
        MemorySearch.render_tags, so another robot's tags read as this robot's do."""
        self.graph = graph
        self.render_tags = render_tags
        backend = graph.backend
        self.own = getattr(backend, "robot_id", "") or robot_id
        milvus = hasattr(backend, "search_text")
        self.alone = "memory_backend is sqlite" if not milvus else "fleet_slot is 0 (a robot alone in Milvus)"
        self.reader = FleetReader(backend) if milvus and backend.config.fleet_slot > 0 else None

    def scope(self, robot_id: str) -> Scope:
        """The scope of a request's robot_id; INVALID_ARGUMENT for an invalid id or no fleet to search."""
        if not isinstance(robot_id, str):
            raise MemoryApiError(errors.INVALID_ARGUMENT, "robot_id must be a string")
        if robot_id and (problem := robot_id_problem(robot_id)):
            raise MemoryApiError(errors.INVALID_ARGUMENT, problem)
        if robot_id == self.own:
            return Scope(local=True)
        if not robot_id:
            return Scope(local=True, remote=f'robot_id != "{self.own}"' if self.reader else "")
        if self.reader is None:
            raise MemoryApiError(
                errors.INVALID_ARGUMENT,
                f"no fleet: {self.alone}; only robot {self.own!r} exists here, so robot_id {robot_id!r} has no "
                "memories (use '' or this robot's id)",
            )
        return Scope(local=False, remote=f'robot_id == "{robot_id}"', named=True)

    # -- limits and filters -----------------------------------------------------------------------
    def _limits(self, scope: Scope, before_clip: int, before_stamp_ns: int) -> tuple[int, int] | None:
        """(clip limit, stamp limit) for the remote robots; None when none of their memories count."""
        if scope.named or before_clip < 0:
            return before_clip, before_stamp_ns
        graph = self.graph
        with graph.lock:
            if before_clip > graph.last_clip_index:
                return -1, before_stamp_ns
            earlier = [index for index in graph.clips if index <= before_clip]
            if not earlier:
                return None  # this robot's clip before_clip is before anything it stored
            end_ns = graph.clips[max(earlier)]["end_ns"]
        return -1, min(end_ns, before_stamp_ns) if before_stamp_ns > 0 else end_ns

    def _best(self, vectors: np.ndarray, limit: int, expr: str, where: Where = NOWHERE) -> list[dict]:
        """Text rows matching expr, each with its best cosine over the query variants and its weight;
        rows of a clip whose write broke off (not listed in its clip record), memories weakened to
        nothing and places outside where's exact shape are left out, as the local search leaves them out.
        Best first."""
        best: dict[tuple[str, str], dict] = {}
        fetch = limit * PLACE_OVERFETCH if where.has_place else limit  # the box holds more than the shape
        for hits in self.reader.nearest(vectors, fetch, expr, narrow=where.active):
            for row in hits:
                row["place"] = place_of_row(row)
                if not where.keeps_place(row["place"]):
                    continue
                key = (row["robot_id"], row["node_id"])
                if key not in best or row["score"] > best[key]["score"]:
                    best[key] = row
        by_robot: dict[str, list[dict]] = defaultdict(list)
        for row in best.values():
            by_robot[row["robot_id"]].append(row)
        kept = []
        for robot, rows in by_robot.items():
            clips = self.reader.clips(robot, [row["clip_index"] for row in rows])
            weights = self.reader.weights(robot, [row["node_id"] for row in rows if row["kind"] == KIND_SEMANTIC])
            for row in rows:
                row["weight"] = weights.get(row["node_id"], 1.0)
                listed = row["node_id"] in clips.get(row["clip_index"], {}).get("nodes", [])
                if listed and not (row["kind"] == KIND_SEMANTIC and row["weight"] <= 0):
                    kept.append(row)
        return sorted(kept, key=lambda row: (-row["score"], row["robot_id"], row["seq"]))

    # -- search_node ------------------------------------------------------------------------------
    def node_hits(
        self, scope: Scope, vectors: np.ndarray, top_k: int, kinds: set[str], before_clip: int, before_stamp_ns: int,
        where: Where = NOWHERE,
    ) -> list[SearchHit]:  # fmt: skip
        """The remote robots' text memories closest to the query variants (SearchHits, best first), in where's
        time and place window (Milvus scalar filters)."""
        limits = self._limits(scope, before_clip, before_stamp_ns)
        if not scope.remote or limits is None or not kinds:
            return []
        rows = self._best(vectors, top_k, milvus_filter(scope.remote, sorted(kinds), where, *limits), where)[:top_k]
        return [
            SearchHit(
                f"{r['robot_id']}/{r['node_id']}", r["kind"], r["text"], r["clip_index"], r["start_ns"], r["end_ns"],
                list(r["entity_ids"]), r["weight"], r["score"], r["robot_id"], r["place"],
            )
            for r in rows
        ]  # fmt: skip

    # -- search_clip ------------------------------------------------------------------------------
    def clip_records(self, scope: Scope, request: ClipQuery) -> list[ClipRecord]:
        """The remote robots' best clips (a clip scores its best memory's cosine), each with all its
        memories (only those started by the stamp limit, when there is one), best first."""
        vectors, top_k, threshold = request.vectors, request.top_k, request.threshold
        limits = self._limits(scope, request.before_clip, request.before_stamp_ns)
        if not scope.remote or limits is None:
            return []
        clip_limit, stamp_ns = limits
        expr = milvus_filter(scope.remote, [KIND_EPISODIC, KIND_SEMANTIC], request.where, *limits)
        rows = self._best(vectors, max(50, top_k * 20), expr, request.where)
        by_robot: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            by_robot[row["robot_id"]].append(row)
        scores: dict[tuple[str, int], float] = {}
        for robot, robot_rows in by_robot.items():
            semantic = [r["node_id"] for r in robot_rows if r["kind"] == KIND_SEMANTIC]
            links: dict[str, list[int]] = defaultdict(list)
            for link in self.reader.node_clips(robot, node_ids=semantic) if semantic else []:
                links[link["node"]].append(int(link["clip"]))
            for row in robot_rows:
                for index in links[row["node_id"]] if row["kind"] == KIND_SEMANTIC else [row["clip_index"]]:
                    if clip_limit < 0 or index <= clip_limit:
                        scores[(robot, index)] = max(scores.get((robot, index), -2.0), row["score"])
        ranked = sorted(
            ((s, r, c) for (r, c), s in scores.items() if s >= threshold), key=lambda t: (-t[0], t[1], t[2])
        )
        chosen: list[tuple[float, str, int, dict]] = []
        stored: dict[str, dict[int, dict]] = {}
        for score, robot, index in ranked:
            if robot not in stored:
                stored[robot] = self.reader.clips(robot, [c for _, r, c in ranked if r == robot])
            clip = stored[robot].get(index)
            if clip is not None and (stamp_ns <= 0 or clip["start_ns"] <= stamp_ns):
                chosen.append((score, robot, index, clip))
            if len(chosen) == top_k:
                break
        records = {}
        for robot in dict.fromkeys(r for _, r, _, _ in chosen):
            mine = [(score, index, clip) for score, r, index, clip in chosen if r == robot]
            records.update(self._records(robot, mine, vectors, request.labels))
        out = [records[(robot, index)] for _, robot, index, _ in chosen]
        return [record.started_by(stamp_ns) for record in out] if stamp_ns > 0 else out

    def _records(
        self, robot: str, clips: list[tuple[float, int, dict]], vectors: np.ndarray, labels: dict[str, str]
    ) -> dict[tuple[str, int], ClipRecord]:
        """ClipRecords of one remote robot's clips, with all their memories scored against vectors."""
        indexes = [index for _, index, _ in clips]
        semantic: dict[int, list[str]] = defaultdict(list)
        for link in self.reader.node_clips(robot, clips=indexes):
            if link["node"] not in semantic[int(link["clip"])]:
                semantic[int(link["clip"])].append(link["node"])
        all_semantic = [n for nodes in semantic.values() for n in nodes]
        rows = {row["node_id"]: row for row in self.reader.texts(robot, indexes, all_semantic)}
        weights = self.reader.weights(robot, all_semantic)
        vectors_of = {n: np.asarray(r["vector"], dtype=np.float32) for n, r in rows.items()}
        render = self.render_tags

        def node(row: dict) -> TextNode:
            return TextNode(
                f"{robot}/{row['node_id']}", row["seq"], row["kind"], render(row["text"], labels), row["clip_index"],
                row["start_ns"], row["end_ns"], weights.get(row["node_id"], 1.0), list(row["entity_ids"]),
                place_of_row(row),
            )  # fmt: skip

        out = {}
        for score, index, clip in clips:
            listed = set(clip.get("nodes", []))
            own = [r for r in rows.values() if r["kind"] == KIND_EPISODIC and r["clip_index"] == index]
            episodic = sorted((r for r in own if r["node_id"] in listed), key=lambda r: r["seq"])
            members = [rows[n] for n in semantic[index] if n in rows]  # as the local clip: every link
            record = ClipRecord(
                index, clip["start_ns"], clip["end_ns"], clip["stored_ns"], [node(r) for r in episodic],
                [node(r) for r in members], list(clip["entity_ids"]), score, robot_id=robot,
            )  # fmt: skip
            for item in record.episodic + record.semantic:
                stored = vectors_of[item.node_id.split("/", 1)[1]]
                unit = stored / max(float(np.linalg.norm(stored)), 1e-12)
                record.node_scores[item.node_id] = float((vectors @ unit).max())
            out[(robot, index)] = record
        return out
