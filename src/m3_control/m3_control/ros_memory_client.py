"""MemoryClient over the memory node's ROS services (SearchClip, SearchNode, GetNames, GetEntity, LocateEntity).

Called from the action's execute callback: each call waits on its future with a timeout, so the
node must spin in a MultiThreadedExecutor with these clients in a reentrant callback group.
A missing service, a timeout or STORE_UNAVAILABLE/INTERNAL_ERROR becomes MemoryUnavailable.
"""

from __future__ import annotations

import threading

from builtin_interfaces.msg import Time
from rclpy.callback_groups import CallbackGroup
from rclpy.client import Client
from rclpy.node import Node

from m3_control.memory_client import (
    ENTITY_ID_RE,
    Clip,
    Memory,
    MemoryUnavailable,
    clip_of,
    memory_error,
    memory_of,
    place_of,
)
from m3_interfaces.msg import ClipMemory, MemoryItem
from m3_interfaces.srv import GetEntity, GetNames, LocateEntity, SearchClip, SearchNode
from m3_memory.graph.records import Place


def to_time(stamp_ns: int) -> Time:
    sec, nanosec = divmod(max(0, stamp_ns), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


QUERY_ERRORS = (
    SearchClip.Response.EMPTY_QUERY,
    SearchClip.Response.QUERY_TOO_LONG,
    SearchClip.Response.INVALID_ARGUMENT,
)


def memory_from_msg(item: MemoryItem) -> Memory:
    return memory_of(item)


def clip_from_msg(clip: ClipMemory) -> Clip:
    return clip_of(clip.clip_index, clip.score, [*clip.episodic, *clip.semantic], robot_id=clip.robot_id)


class RosMemoryClient:
    """Blocking MemoryClient for use inside a callback of a multi-threaded executor."""

    def __init__(self, node: Node, prefix: str, timeout_s: float, callback_group: CallbackGroup) -> None:
        prefix = node.resolve_service_name(prefix.rstrip("/"))  # relative: in the node's namespace
        self.prefix, self.timeout_s = prefix, timeout_s
        self.search_clip_client = node.create_client(SearchClip, f"{prefix}/search_clip", callback_group=callback_group)
        self.search_node_client = node.create_client(SearchNode, f"{prefix}/search_node", callback_group=callback_group)
        self.get_entity_client = node.create_client(GetEntity, f"{prefix}/get_entity", callback_group=callback_group)
        self.get_names_client = node.create_client(GetNames, f"{prefix}/get_names", callback_group=callback_group)
        self.locate_client = node.create_client(LocateEntity, f"{prefix}/locate_entity", callback_group=callback_group)

    def destroy(self, node: Node) -> None:
        """Destroy the service clients (the control node's cleanup)."""
        for client in (
            self.search_clip_client, self.search_node_client, self.get_entity_client, self.get_names_client,
            self.locate_client,
        ):  # fmt: skip
            node.destroy_client(client)

    def _call(self, client: Client, request):
        if not client.service_is_ready() and not client.wait_for_service(timeout_sec=self.timeout_s):
            raise MemoryUnavailable(f"memory service {client.srv_name} not available within {self.timeout_s} s")
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        if not done.wait(self.timeout_s):
            client.remove_pending_request(future)
            raise MemoryUnavailable(f"memory service {client.srv_name} did not answer within {self.timeout_s} s")
        response = future.result()
        if response is None:
            raise MemoryUnavailable(f"memory service {client.srv_name} failed: {future.exception()}")
        return response

    def _check(self, client: Client, response) -> None:
        if response.error_code == 0:
            return
        raise memory_error(client.srv_name, response.error_code, response.error_message, QUERY_ERRORS)

    def search_clip(
        self, query, top_k=2, threshold=0.5, before_clip=-1, conversation_id="", before_stamp_ns=0, robot_id="",
        after_ns=0,
    ) -> list[Clip]:  # fmt: skip
        request = SearchClip.Request(
            query=query,
            top_k=top_k,
            threshold=threshold,
            before_clip=before_clip,
            conversation_id=conversation_id,
            before_stamp=to_time(before_stamp_ns),
            robot_id=robot_id,
            after_stamp=to_time(after_ns),
        )
        response = self._call(self.search_clip_client, request)
        self._check(self.search_clip_client, response)
        return [clip_from_msg(c) for c in response.clips]

    def search_node(
        self, query, kinds=(), top_k=20, before_clip=-1, before_stamp_ns=0, robot_id="", after_ns=0
    ) -> list[Memory]:
        request = SearchNode.Request(
            query=query,
            kinds=list(kinds),
            top_k=top_k,
            before_clip=before_clip,
            before_stamp=to_time(before_stamp_ns),
            robot_id=robot_id,
            after_stamp=to_time(after_ns),
        )
        response = self._call(self.search_node_client, request)
        self._check(self.search_node_client, response)
        return [memory_from_msg(m) for m in response.items]

    def entity_name(self, entity_id: str) -> str | None:
        """The learnt name of an entity; None when memory has none, does not know the id, or serves no get_entity.

        Best effort: names also come from retrieved memories, so a missing service costs no wait.
        """
        if not self.get_entity_client.service_is_ready():
            return None
        response = self._call(self.get_entity_client, GetEntity.Request(entity_id=entity_id))
        if response.error_code == GetEntity.Response.UNKNOWN_ENTITY:
            return None
        self._check(self.get_entity_client, response)
        return response.entity.name or None

    def entity_names(self, entity_ids: list[str], people: bool = False) -> dict[str, str]:
        """Names of many entities in one service call (get_names), as the loop asks once per round.

        Not best effort, unlike entity_name: the loop's answer check needs the names memory knows,
        and a memory node that serves search_clip serves get_names too (MemoryUnavailable otherwise).
        """
        request = GetNames.Request(entity_ids=list(entity_ids), people=bool(people))
        response = self._call(self.get_names_client, request)
        self._check(self.get_names_client, response)
        return dict(zip(response.entity_ids, response.names, strict=True))

    def locate_entity(self, name: str) -> tuple[str, Place | None, int]:
        """Where an entity id or a person's name was last observed (locate_entity): (entity id, place or None,
        stamp of that observation); LookupError when memory knows no such one or never observed it."""
        request = LocateEntity.Request(max_sightings=1)
        if ENTITY_ID_RE.fullmatch(f"<{name}>"):
            request.entity_id = name
        else:
            request.name = name
        return self._located(request, name)

    def locate_object(self, label: str) -> tuple[str, Place | None, int]:
        """Where memory last saw an object of this class ("cup"), as locate_entity; LookupError when none."""
        return self._located(LocateEntity.Request(label=label, max_sightings=1), label)

    def _located(self, request: LocateEntity.Request, name: str) -> tuple[str, Place | None, int]:
        response = self._call(self.locate_client, request)
        if response.error_code == LocateEntity.Response.UNKNOWN_ENTITY or (
            response.error_code == 0 and not response.sightings
        ):
            raise LookupError(response.error_message or f"{name} was never observed")
        self._check(self.locate_client, response)
        last = response.sightings[0]
        return response.entity_id, place_of(last.place), int(last.last.sec) * 1_000_000_000 + int(last.last.nanosec)
