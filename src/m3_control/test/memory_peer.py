"""A test memory node in its own process: serves SearchClip, SearchNode, GetEntity and GetNames from the fixture clips.

Run: python memory_peer.py  (services under /m3/memory, names face_1=Alice, face_2=Bob).
"""

from __future__ import annotations

import rclpy
from fixtures import FakeMemory
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from m3_interfaces.msg import ClipMemory, Entity, MemoryItem
from m3_interfaces.srv import GetEntity, GetNames, SearchClip, SearchNode

NAMES = {"face_1": "Alice", "face_2": "Bob"}


def item(memory) -> MemoryItem:
    return MemoryItem(
        node_id=memory.node_id,
        kind=memory.kind,
        text=memory.text,
        clip_index=memory.clip_index,
        entity_ids=list(memory.entity_ids),
        weight=1.0,
        score=float(memory.score),
    )


class MemoryPeer(Node):
    def __init__(self) -> None:
        super().__init__("memory_peer")
        self.memory = FakeMemory(names=NAMES)
        self.create_service(SearchClip, "/m3/memory/search_clip", self.on_search_clip)
        self.create_service(SearchNode, "/m3/memory/search_node", self.on_search_node)
        self.create_service(GetEntity, "/m3/memory/get_entity", self.on_get_entity)
        self.create_service(GetNames, "/m3/memory/get_names", self.on_get_names)

    def on_search_clip(self, request, response):
        if not request.query.strip():
            response.error_code, response.error_message = SearchClip.Response.EMPTY_QUERY, "empty query"
            return response
        for clip in self.memory.search_clip(request.query, request.top_k, request.threshold, request.before_clip):
            episodic = [item(m) for m in clip.memories if m.kind == "episodic"]
            semantic = [item(m) for m in clip.memories if m.kind == "semantic"]
            response.clips.append(
                ClipMemory(clip_index=clip.clip_index, score=clip.score, episodic=episodic, semantic=semantic)
            )
        return response

    def on_search_node(self, request, response):
        response.items = [
            item(m) for m in self.memory.search_node(request.query, (), request.top_k, request.before_clip)
        ]
        return response

    def on_get_entity(self, request, response):
        name = NAMES.get(request.entity_id)
        if name is None:
            response.error_code = GetEntity.Response.UNKNOWN_ENTITY
            return response
        response.entity = Entity(entity_id=request.entity_id, kind="face", name=name)
        return response

    def on_get_names(self, request, response):
        names = self.memory.entity_names(list(request.entity_ids), request.people)
        response.entity_ids, response.names = list(names), list(names.values())
        return response


def main() -> None:
    rclpy.init()
    node = MemoryPeer()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
