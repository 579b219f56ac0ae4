"""Entity search: the face and voice entities nearest a query embedding, and the entities a text query names.

A mixin of MemorySearch (m3_memory.search.api), which owns the graph these methods read.
"""

from __future__ import annotations

import re

import numpy as np

from m3_memory.errors import MemoryApiError
from m3_memory.graph.records import KIND_OBJECT, KIND_PERSON, KIND_TEXT, THING_KINDS
from m3_memory.search.search_types import SearchHit


def check_embedding(vector, code: int, what: str, dim: int | None) -> np.ndarray:
    """A usable unit query vector, or MemoryApiError(code)."""
    array = np.asarray(vector, dtype=np.float64).reshape(-1)
    if array.size == 0:
        raise MemoryApiError(code, f"{what} embedding is empty")
    if not np.all(np.isfinite(array)):
        raise MemoryApiError(code, f"{what} embedding contains NaN or infinity")
    if dim is not None and array.size != dim:
        raise MemoryApiError(code, f"{what} embedding has {array.size} values; the stored {what}s have {dim}")
    norm = float(np.linalg.norm(array))
    if norm < 1e-9:
        raise MemoryApiError(code, f"{what} embedding is all zeros")
    return (array / norm).astype(np.float32)


class EntitySearchMixin:
    """Entities for search_node; see the module docstring."""

    def _entity_visible(self, entity_id: str, before_clip: int, before_stamp_ns: int) -> bool:
        record = self.graph.entities.get(entity_id)
        if record is None:
            return False
        if before_clip >= 0 and record.first_clip > before_clip:
            return False
        return not (before_stamp_ns > 0 and record.first_ns > before_stamp_ns)

    def _entity_neighbours(
        self, vector, kind: str, code: int, k: int, before_clip: int, before_stamp_ns: int
    ) -> list[SearchHit]:
        graph = self.graph
        with graph.lock:
            indexes = {key: index for key, index in graph.entity_index.items() if key.startswith(kind + ":")}
            dims = sorted(index.dim for index in indexes.values())
            size = np.asarray(vector).reshape(-1).size
            dim = size if size in dims else (dims[0] if dims else None)
            unit = check_embedding(vector, code, kind, dim)
            if dim is None:
                return []
            index = indexes[f"{kind}:{dim}"]
            found = index.search(
                unit, k, keep=lambda label: self._entity_visible(f"{kind}_{label}", before_clip, before_stamp_ns)
            )
            return [self._entity_hit(f"{kind}_{label}", score) for label, score in found]

    def _entities_named(self, query: str, wanted: set[str], before_clip: int, before_stamp_ns: int) -> list[SearchHit]:
        """Entities whose id or learnt name the text query (respelled: in memory's spelling) mentions, and objects
        whose class it names ("where is the umbrella?"), score 1."""
        words = {w.lower() for w in re.findall(r"(?:face|voice|person|object|text)_\d+|[A-Za-z][A-Za-z'-]*", query)}
        graph = self.graph
        with graph.lock:
            # ids mentioned (and what they were merged into), then persons called by a learnt name
            found = {e for w in words if "_" in w for e in (w, graph.resolve(w)) if e in graph.entities}
            names = {w for w in words if "_" not in w}
            if names:
                found |= {
                    r.entity_id
                    for r in graph.entities.values()
                    if r.kind == KIND_PERSON and r.name and r.name.lower() in names
                }
                found |= {
                    r.entity_id
                    for r in graph.entities.values()
                    if r.kind == KIND_OBJECT and r.label and set(r.label.split()) <= names
                }
            records = sorted((graph.entities[e] for e in found), key=lambda r: (r.kind, r.seq))
            return [
                self._entity_hit(r.entity_id, 1.0)
                for r in records
                if r.kind in wanted and self._entity_visible(r.entity_id, before_clip, before_stamp_ns)
            ]

    def _entity_hit(self, entity_id: str, score: float) -> SearchHit:
        graph = self.graph
        record = graph.entities[entity_id]
        if record.kind == KIND_PERSON:
            members = graph.members_of(entity_id)
            text = f"<{entity_id}>" + (f" is called {record.name}" if record.name else "")
            text += f"; faces and voices: {', '.join(members) or 'none'}"
        elif record.kind in THING_KINDS:  # seen, not a person: named in words (tags are people's)
            members = []
            text = f"{entity_id} is {'written text' if record.kind == KIND_TEXT else 'an object'}: {record.label}"
        else:
            members = [graph.resolve(record.person_id)]
            name = graph.display_name(entity_id)
            text = f"<{entity_id}> of <{members[0]}>" + (f" ({name})" if name else "")
        return SearchHit(
            entity_id, record.kind, text, record.first_clip, record.first_ns, record.last_ns, members, 1.0, score
        )
