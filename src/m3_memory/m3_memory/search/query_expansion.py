"""Query expansion: a query in memory's spelling of people's names, and with each entity tag replaced by
each id of its person, so that one search finds memories whichever id of a person they carry.

A mixin of MemorySearch (m3_memory.search.api), which owns the graph these methods read.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from m3_memory.graph.name_spellings import CAPITALISED_RE, spelling_in
from m3_memory.graph.records import KIND_PERSON
from m3_memory.graph.tags import TAG_RE

if TYPE_CHECKING:
    from m3_memory.graph.memory_graph import MemoryGraph

MAX_VARIANTS = 16  # alias expansion of a query is capped (cartesian product of its tags)


class QueryExpansionMixin:
    """The query variants search_node and search_clip embed; see the module docstring."""

    graph: MemoryGraph

    def _person_names(self) -> set[str]:
        with self.graph.lock:
            return {r.name for r in self.graph.entities.values() if r.kind == KIND_PERSON and r.name}

    def respelled(self, query: str) -> str:
        """The query with each capitalised word that is another spelling of one person's name in memory
        written as memory spells it ("Yusuf" -> "Yosuf", as speech recognition heard it)."""
        names = self._person_names()
        if not names:
            return query
        return CAPITALISED_RE.sub(lambda m: spelling_in(m.group(1), names) or m.group(1), query)

    def query_variants(self, query: str, respelled: str | None = None) -> list[str]:
        """The query (and, when it spells a person's name differently from memory, the query respelled:
        `respelled`, computed when not given), with each entity tag replaced by each id of its person
        (reference semantics: <person_2> becomes <face_1> / <voice_3> / ...), capped at MAX_VARIANTS."""
        respelled = self.respelled(query) if respelled is None else respelled
        if respelled != query:
            return self._tag_variants(query)[: MAX_VARIANTS // 2] + self._tag_variants(respelled)[: MAX_VARIANTS // 2]
        return self._tag_variants(query)

    def _tag_variants(self, query: str) -> list[str]:
        tags = list(dict.fromkeys(m.group(1) for m in TAG_RE.finditer(query)))
        if not tags:
            return [query]
        options = []
        for tag in tags:
            person = self.graph.person_of(tag)
            ids = [tag]
            if person is not None:
                ids += [m for m in self.graph.members_of(person) if m != tag]
                ids += [a for a in [person, *self.graph.aliases_of(person)] if a not in ids]
            options.append(ids)
        variants = []
        for combo in itertools.product(*options):
            text = query
            for tag, replacement in zip(tags, combo, strict=True):
                text = text.replace(f"<{tag}>", f"<{replacement}>")
            variants.append(text)
            if len(variants) == MAX_VARIANTS:
                break
        return variants
