"""The service path in its own process, for parity with the direct client: the real MemoryNode over a
memory directory, and RosMemoryClient calling its services over DDS from a second node.

Run: python service_parity_peer.py MEMORY_DIR CALLS_JSON. CALLS_JSON is a list of
["search_clip", kwargs] / ["search_node", kwargs] / ["entity_name", entity_id]; prints one JSON line
with one outcome per call: {"result": ...} (dataclasses as dicts) or {"error": exception class name}.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter

from m3_control.memory_client import MemoryQueryRejected, MemoryUnavailable
from m3_control.ros_memory_client import RosMemoryClient
from m3_memory.memory_node import MemoryNode
from m3_runtime.managed_node import bring_up
from m3_runtime.node_shutdown import spinning


def plain(value):
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main(memory_dir: str, calls_path: str) -> int:
    with open(calls_path, encoding="utf-8") as handle:
        calls = json.load(handle)
    rclpy.init()
    memory_node = bring_up(MemoryNode(parameter_overrides=[Parameter("memory_dir", value=memory_dir)]))
    client_node = Node("parity_client")
    client = RosMemoryClient(client_node, "/m3/memory", 20.0, ReentrantCallbackGroup())
    outcomes = []
    try:
        with spinning(memory_node, client_node):  # stopped, then both nodes destroyed (the store closed)
            for service in (client.search_clip_client, client.search_node_client, client.get_entity_client):
                if not service.wait_for_service(timeout_sec=30.0):  # entity_name skips a service not yet seen
                    raise RuntimeError(f"{service.srv_name} did not appear")
            for name, argument in calls:
                try:
                    if name == "entity_name":
                        result = client.entity_name(argument)
                    else:
                        result = getattr(client, name)(**argument)
                    outcomes.append({"result": plain(result)})
                except (MemoryQueryRejected, MemoryUnavailable) as error:
                    outcomes.append({"error": type(error).__name__, "message": str(error)})
    finally:
        rclpy.try_shutdown()
    print(json.dumps(outcomes), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
