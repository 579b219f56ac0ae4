"""The service transport for `m3 bench control --memory-transport service`: the memory node's services
over DDS, as `m3 run --memory-transport service` and a control node alone reach memory.

Why a separate module: bench.py measures the loop over a client; this brings up the real MemoryNode
over the bench's memory directory and a RosMemoryClient on a second node, both in this process on one
MultiThreadedExecutor spinning in a thread (the loop blocks on each call, as in the action's callback),
so each search, and the round's one get_names, is a DDS request with its message conversions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def service_client(memory_dir: str, embedder, timeout_s: float = 60.0) -> Iterator[tuple[object, object]]:
    """(RosMemoryClient, the MemoryNode's Memory) over a MemoryNode serving memory_dir in this process.

    embedder: the bench's TextEmbedder, shared (the node's query embeddings then use the same runtime).
    The directory must not be open elsewhere: the bench closes its own Memory first."""
    import rclpy
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.context import Context
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from m3_control.ros_memory_client import RosMemoryClient
    from m3_memory.memory_node import MemoryNode
    from m3_runtime.managed_node import bring_up
    from m3_runtime.node_shutdown import spinning

    context = Context()
    rclpy.init(args=[], context=context)
    try:
        memory_node = MemoryNode(
            embedder=embedder, context=context, parameter_overrides=[Parameter("memory_dir", value=memory_dir)]
        )
        try:
            bring_up(memory_node)
        except BaseException:
            memory_node.destroy_node()
            raise
        client_node = Node("bench_memory_client", context=context)
        client = RosMemoryClient(client_node, "/m3/memory", timeout_s, ReentrantCallbackGroup())
        # spinning: stopped in order, then the nodes destroyed (the memory node closes its store)
        with spinning(memory_node, client_node):
            if memory_node.memory is None:
                raise RuntimeError(f"the memory node could not open {memory_dir}: {memory_node.store_error}")
            for service in (client.search_clip_client, client.search_node_client, client.get_names_client):
                if not service.wait_for_service(timeout_sec=timeout_s):
                    raise RuntimeError(f"{service.srv_name} did not appear within {timeout_s} s")
            yield client, memory_node.memory
    finally:
        rclpy.try_shutdown(context=context)
