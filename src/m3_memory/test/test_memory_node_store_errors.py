"""A memory_node whose store is newer than the program: it stays up and every service says why."""

from __future__ import annotations

import json
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from m3_interfaces.srv import GetEntity, GetStats, SearchClip, SearchNode
from m3_memory.memory_node import MemoryNode
from m3_memory.store import SCHEMA_FILE


def test_newer_store_gives_store_unavailable(tmp_path):
    memory_dir = tmp_path / "newer"
    memory_dir.mkdir()
    (memory_dir / SCHEMA_FILE).write_text(json.dumps({"format": "m3_memory", "schema_version": 99}))
    rclpy.init()
    try:
        node = MemoryNode(parameter_overrides=[Parameter("memory_dir", value=str(memory_dir))])
        client = Node("memory_store_error_client")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.add_node(client)
        requests = [
            (GetStats, "get_stats", GetStats.Request()),
            (SearchNode, "search_node", SearchNode.Request(query="keys")),
            (SearchClip, "search_clip", SearchClip.Request(query="keys")),
            (GetEntity, "get_entity", GetEntity.Request(entity_id="person_1")),
        ]
        for srv_type, name, request in requests:
            cli = client.create_client(srv_type, f"/m3/memory/{name}")
            assert cli.wait_for_service(timeout_sec=20.0)
            future = cli.call_async(request)
            deadline = time.monotonic() + 20
            while not future.done() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            response = future.result()
            assert response.error_code == 6, name  # STORE_UNAVAILABLE in every srv
            assert "schema version 99" in response.error_message
        assert not (memory_dir / "memory.sqlite3").exists()  # never created or overwritten
        client.destroy_node()
        node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_openai_memorizer_without_endpoint_fails_at_start_up(tmp_path):
    import pytest

    rclpy.init()
    try:
        overrides = [Parameter("memory_dir", value=str(tmp_path / "m")), Parameter("memorizer", value="openai")]
        with pytest.raises(ValueError, match="openai_endpoint"):
            MemoryNode(parameter_overrides=overrides)
        overrides[1] = Parameter("memorizer", value="magic")
        with pytest.raises(ValueError, match="'rules' or 'openai'"):
            MemoryNode(parameter_overrides=overrides)
    finally:
        rclpy.try_shutdown()
