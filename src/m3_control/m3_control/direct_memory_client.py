"""MemoryClient over an m3_memory `Memory` object in this process: the search functions called directly.

The one-process bring-up (`m3 run`, m3_agent.bringup) runs the memory node and the control node in
one process; this adapter lets the control loop search the memory node's Memory without a DDS
round trip per search (request and response serialisation, discovery, a second executor thread).

It keeps the service path's semantics exactly (ros_memory_client.py + the memory node's service
callbacks): the same m3_memory calls with the same arguments (a negative before_stamp_ns counts as
"no limit", as the service's Time field cannot hold one), the same conversion to the loop's
dataclasses (memory_client.memory_of / clip_of: a clip's memories episodic then semantic, each
scored by its cosine to the query), and the same error mapping (memory_client.memory_error):
EMPTY_QUERY / QUERY_TOO_LONG / INVALID_ARGUMENT -> MemoryQueryRejected; a store that is not open,
a StoreError or any other failure -> MemoryUnavailable. The only difference: scores stay Python
floats here, where the service rounds them (and the request's threshold) to float32.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from m3_control.memory_client import ENTITY_ID_RE, Clip, Memory, clip_of, memory_error, memory_of
from m3_memory import errors
from m3_memory.errors import MemoryApiError, StoreError
from m3_memory.graph.records import Place

if TYPE_CHECKING:
    from m3_memory.memory import Memory as M3Memory

# Codes that reject the query rather than report memory down (SearchClip/SearchNode values, tested equal).
QUERY_ERRORS = (errors.EMPTY_QUERY, errors.QUERY_TOO_LONG, errors.INVALID_ARGUMENT)

log = logging.getLogger(__name__)


class DirectMemoryClient:
    """Blocking MemoryClient calling Memory.search in this thread (Memory is thread-safe)."""

    transport = "direct"

    def __init__(
        self,
        memory: M3Memory | None = None,
        unavailable_reason: str = "",
        source: Callable[[], tuple[M3Memory | None, str]] | None = None,
    ) -> None:
        """memory: the memory node's Memory; None when its store could not be opened, and then every
        call raises MemoryUnavailable with unavailable_reason (the service would answer STORE_UNAVAILABLE).
        source: instead, called at each search for (memory or None, the reason it is None)."""
        self.memory = memory
        self.unavailable_reason = unavailable_reason or "memory store not open"
        self._source = source or (lambda: (self.memory, self.unavailable_reason))

    @classmethod
    def of_node(cls, memory_node) -> DirectMemoryClient:
        """The client for an m3_memory MemoryNode in this process: its Memory while the node is active, as
        its services serve only then; read at each call, so the node may be configured later or again."""

        def current() -> tuple[M3Memory | None, str]:
            if not memory_node.active:
                return None, f"{memory_node.get_name()} is not active"
            return memory_node.memory, memory_node.store_error or "memory store not open"

        return cls(source=current)

    def _search(self):
        memory, reason = self._source()
        if memory is None:
            raise memory_error("memory", errors.STORE_UNAVAILABLE, reason, QUERY_ERRORS)
        return memory.search

    @staticmethod
    def _mapped(operation: str, error: Exception) -> Exception:
        """The loop's exception for a failure of memory.search.<operation>, as the service would map it."""
        where = f"memory {operation}"
        if isinstance(error, MemoryApiError):
            return memory_error(where, error.code, error.message, QUERY_ERRORS)
        if isinstance(error, StoreError):
            return memory_error(where, errors.STORE_UNAVAILABLE, str(error), QUERY_ERRORS)
        log.error("memory %s failed", operation, exc_info=error)  # the service logs its traceback too
        return memory_error(where, errors.INTERNAL_ERROR, f"{type(error).__name__}: {error}", QUERY_ERRORS)

    def search_clip(
        self,
        query: str,
        top_k: int = 2,
        threshold: float = 0.5,
        before_clip: int = -1,
        conversation_id: str = "",
        before_stamp_ns: int = 0,
        robot_id: str = "",
        after_ns: int = 0,
    ) -> list[Clip]:
        search = self._search()
        try:
            records = search.search_clip(
                query, int(top_k), float(threshold), int(before_clip), conversation_id, max(0, int(before_stamp_ns)),
                robot_id=robot_id, where=search.where(int(after_ns)),
            )  # fmt: skip
        except Exception as error:  # every failure becomes the service's error mapping
            raise self._mapped("search_clip", error) from error
        return [
            clip_of(
                record.clip_index,
                record.score,
                [*record.episodic, *record.semantic],
                record.node_scores,
                record.robot_id,
                record.names,
            )
            for record in records
        ]

    def search_node(
        self,
        query: str,
        kinds: tuple[str, ...] = (),
        top_k: int = 20,
        before_clip: int = -1,
        before_stamp_ns: int = 0,
        robot_id: str = "",
        after_ns: int = 0,
    ) -> list[Memory]:
        search = self._search()
        try:
            hits = search.search_node(
                query, list(kinds), int(top_k), int(before_clip), max(0, int(before_stamp_ns)), robot_id=robot_id,
                where=search.where(int(after_ns)),
            )  # fmt: skip
        except Exception as error:  # every failure becomes the service's error mapping
            raise self._mapped("search_node", error) from error
        return [memory_of(hit) for hit in hits]

    def locate_entity(self, name: str) -> tuple[str, Place | None, int]:
        """As RosMemoryClient.locate_entity: (entity id, place or None, stamp); LookupError when unknown."""
        is_id = bool(ENTITY_ID_RE.fullmatch(f"<{name}>"))
        return self._located(name, entity_id=name if is_id else "", name="" if is_id else name)

    def locate_object(self, label: str) -> tuple[str, Place | None, int]:
        """As RosMemoryClient.locate_object: where memory last saw an object of this class."""
        return self._located(label, label=label)

    def _located(self, what: str, **request) -> tuple[str, Place | None, int]:
        search = self._search()
        try:
            located = search.locate_entity(**request)
        except MemoryApiError as error:
            if error.code == errors.UNKNOWN_ENTITY:
                raise LookupError(error.message) from None
            raise self._mapped("locate_entity", error) from error
        if not located.sightings:
            raise LookupError(f"{what} was never observed")
        last = located.sightings[0]
        return located.entity_id, last.place, last.last_ns

    def entity_name(self, entity_id: str) -> str | None:
        """The learnt name of an entity; None when memory has none or does not know the id (as get_entity)."""
        search = self._search()
        try:
            view = search.get_entity(entity_id)
        except MemoryApiError as error:
            if error.code == errors.UNKNOWN_ENTITY:
                return None
            raise self._mapped("get_entity", error) from error
        except Exception as error:  # every failure becomes the service's error mapping
            raise self._mapped("get_entity", error) from error
        return view.name or None

    def entity_names(self, entity_ids: list[str], people: bool = False) -> dict[str, str]:
        """Names of many entities in one call (memory's get_names): the loop's lookup per round."""
        search = self._search()
        try:
            return search.get_names(list(entity_ids), people)
        except Exception as error:  # every failure becomes the service's error mapping
            raise self._mapped("get_names", error) from error
