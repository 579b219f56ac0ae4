"""A memory_node whose store is newer than the program, damaged or empty: it stays up and every service
says why (STORE_UNAVAILABLE), and the store is left as it was."""

from __future__ import annotations

import json
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from store_damage import build_store, digest, flip_leaf

from m3_interfaces.srv import GetEntity, GetStats, SearchClip, SearchNode
from m3_memory.memory_node import MemoryNode
from m3_memory.store.sqlite_store import SCHEMA_FILE
from m3_runtime.managed_node import bring_up


def _ask_every_service(memory_dir) -> list:
    """A memory_node on memory_dir and a client node in this process, over DDS: every service's response."""
    rclpy.init()
    try:
        node = bring_up(MemoryNode(parameter_overrides=[Parameter("memory_dir", value=str(memory_dir))]))
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
        responses = []
        for srv_type, name, request in requests:
            cli = client.create_client(srv_type, f"/m3/memory/{name}")
            assert cli.wait_for_service(timeout_sec=20.0)
            future = cli.call_async(request)
            deadline = time.monotonic() + 20
            while not future.done() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            responses.append((name, future.result()))
        client.destroy_node()
        node.destroy_node()
        return responses
    finally:
        rclpy.try_shutdown()


def test_newer_store_gives_store_unavailable(tmp_path):
    memory_dir = tmp_path / "newer"
    memory_dir.mkdir()
    (memory_dir / SCHEMA_FILE).write_text(json.dumps({"format": "m3_memory", "schema_version": 99}))
    for name, response in _ask_every_service(memory_dir):
        assert response.error_code == 6, name  # STORE_UNAVAILABLE in every srv
        assert "schema version 99" in response.error_message
    assert not (memory_dir / "memory.sqlite3").exists()  # never created or overwritten


@pytest.mark.parametrize("damage", ["flipped page", "zero length"])
def test_damaged_store_gives_store_unavailable(tmp_path, embedder, damage):
    """The node stays up on a store with a flipped page (it used to die at start-up) or a zero-length
    memory.sqlite3 (it used to start an empty memory over it), and says why on every service."""
    memory_dir = tmp_path / "mem"
    db_path = build_store(str(memory_dir), embedder, clips=6)
    if damage == "zero length":
        open(db_path, "wb").close()
    else:
        flip_leaf(db_path, "text_nodes")
    before = digest(str(memory_dir))
    expected = "is damaged" if damage == "flipped page" else "is empty (0 bytes)"
    for name, response in _ask_every_service(memory_dir):
        assert response.error_code == 6, name
        assert expected in response.error_message and str(memory_dir) in response.error_message
    assert digest(str(memory_dir)) == before


def test_openai_memorizer_without_endpoint_fails_at_start_up(tmp_path):
    rclpy.init()
    try:
        overrides = [Parameter("memory_dir", value=str(tmp_path / "m")), Parameter("memorizer", value="openai")]
        with pytest.raises(ValueError, match="openai_endpoint"):
            bring_up(MemoryNode(parameter_overrides=overrides))
        overrides[1] = Parameter("memorizer", value="magic")
        with pytest.raises(ValueError, match="'rules' or 'openai'"):
            bring_up(MemoryNode(parameter_overrides=overrides))
    finally:
        rclpy.try_shutdown()
