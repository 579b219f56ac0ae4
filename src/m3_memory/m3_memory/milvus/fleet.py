"""Reading other robots' memories from the Milvus a fleet shares (what m3_memory.search.fleet needs).

A robot's graph in RAM holds only its own clips and memories; a fleet-wide search reads the others'
text rows, clip records, weights and clip links straight from Milvus. Every call fails fast with a
StoreError while the server is away (the services answer STORE_UNAVAILABLE).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from m3_memory.errors import StoreError
from m3_memory.milvus.writer import PLACE_FIELDS, TEXT_FIELDS

if TYPE_CHECKING:
    from m3_memory.milvus.backend import MilvusBackend

T = TypeVar("T")
MAX_LIMIT = 16384  # Milvus' largest search limit
CHUNK = 100  # ids per filter expression
# HNSW's ef for a search whose filter passes few rows (a time or place window): with the configured ef (128),
# Milvus' filtered graph walk found 0.79 (time) and 0.89 (place) of the exact filtered top-10 (m3 bench memory
# --backend milvus, 5,000 memories); with 1024, all of them, at the same latency.
NARROW_EF = 1024


def quoted(values: Iterable[str]) -> str:
    """A Milvus list literal of strings (values are ids made of [A-Za-z0-9_./|-] only)."""
    return json.dumps(list(values))


def any_of(terms: list[str]) -> str:
    return "(" + " or ".join(terms) + ")"


class FleetReader:
    """Queries over every robot's rows in the shared collections (the back-end's client)."""

    def __init__(self, backend: MilvusBackend) -> None:
        self.backend = backend
        # Every text row's fields but the vector; places where the collection has their columns.
        self.fields = ["robot_id", *TEXT_FIELDS, *(PLACE_FIELDS if backend.place_columns else [])]

    @property
    def places(self) -> bool:
        """Whether other robots' memories can be filtered by place (the text collection has the columns)."""
        return self.backend.place_columns

    def _call(self, operation: Callable[[], T]) -> T:
        backend = self.backend
        try:
            backend._check_reachable()
            return operation()
        except backend._errors as error:
            raise StoreError(f"Milvus at {backend.config.uri} is unavailable: {error}") from error

    def nearest(self, vectors: np.ndarray, limit: int, expr: str, narrow: bool = False) -> list[list[dict]]:
        """Per query vector, the text rows matching expr closest to it (self.fields and score: the cosine,
        as the local index scores), best first. narrow: expr passes few rows (HNSW's ef at least NARROW_EF)."""
        backend = self.backend
        limit = min(limit, MAX_LIMIT)
        params = json.loads(backend.config.search_params or "{}")
        if "ef" in params:  # HNSW needs ef >= limit
            params["ef"] = max(int(params["ef"]), limit, NARROW_EF if narrow else 0)
        found = self._call(
            lambda: backend.client.search(
                backend.text_name, data=[np.asarray(v, dtype=np.float32).tolist() for v in vectors], limit=limit,
                filter=expr, output_fields=self.fields,
                search_params={"metric_type": "COSINE", "params": params}, timeout=int(backend.config.timeout_s),
            )
        )  # fmt: skip
        return [[{**hit["entity"], "score": float(hit["distance"])} for hit in hits] for hits in found]

    def records(self, robot_id: str, kind: str, terms: list[str]) -> list[dict]:
        """robot_id's records of this kind matching any of terms (filter expressions), in chunks."""
        backend, found = self.backend, []
        for start in range(0, len(terms), CHUNK):
            expr = f'robot_id == "{robot_id}" and kind == "{kind}" and {any_of(terms[start : start + CHUNK])}'
            found += self._call(lambda e=expr: list(backend._iterate(backend.records_name, e, ["key", "data"])))
        return found

    def clips(self, robot_id: str, indexes: Iterable[int]) -> dict[int, dict]:
        """robot_id's stored clip records by index (a clip whose write broke off has none)."""
        keys = [f'"{robot_id}/clip/{index}"' for index in sorted(set(indexes))]
        terms = [f"key == {key}" for key in keys]
        return {int(r["data"]["clip_index"]): r["data"] for r in self.records(robot_id, "clip", terms)}

    def weights(self, robot_id: str, node_ids: Iterable[str]) -> dict[str, float]:
        """Current weights of robot_id's memories that were ever reinforced or weakened (others: 1)."""
        terms = [f'key == "{robot_id}/weight/{node_id}"' for node_id in sorted(set(node_ids))]
        return {r["key"].rsplit("/", 1)[1]: float(r["data"]["value"]) for r in self.records(robot_id, "weight", terms)}

    def node_clips(self, robot_id: str, node_ids: Iterable[str] = (), clips: Iterable[int] = ()) -> list[dict]:
        """Links semantic memory -> clip that created or reinforced it (delta > 0), of the given
        memories or of the given clips: [{node, clip, delta, order}]."""
        terms = [f'key like "{robot_id}/nodeclip/{node_id}|%"' for node_id in sorted(set(node_ids))]
        terms += [f'data["clip"] == {int(index)}' for index in sorted(set(clips))]
        links = [r["data"] for r in self.records(robot_id, "nodeclip", terms)]
        return sorted((d for d in links if d["delta"] > 0), key=lambda d: d["order"])

    def texts(self, robot_id: str, episodic_clips: Iterable[int], node_ids: Iterable[str]) -> list[dict]:
        """robot_id's text rows with their vectors: the episodic memories of the given clips and the
        memories named."""
        backend, terms = self.backend, []
        clips, ids = sorted(set(episodic_clips)), sorted(set(node_ids))
        terms += [f'(kind == "episodic" and clip_index == {int(index)})' for index in clips]
        for start in range(0, len(ids), CHUNK):
            terms.append(f"node_id in {quoted(ids[start : start + CHUNK])}")
        rows, fields = [], [*self.fields, "vector"]
        for start in range(0, len(terms), CHUNK):
            expr = f'robot_id == "{robot_id}" and {any_of(terms[start : start + CHUNK])}'
            rows += self._call(lambda e=expr: list(backend._iterate(backend.text_name, e, fields)))
        return rows
