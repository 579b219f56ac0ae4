"""An instruction to robot a answered from robot b's memory, over real DDS: two robots of a fleet
share one Milvus Lite server (robot b's clip stored there first, in this process), robot a's
memory_node and control_node run in processes of their own, the Instruct goal goes from here.
With `search_robot_id: robot_a` the control node searches only robot a's memories."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import rclpy
from action_msgs.msg import GoalStatus
from fixtures import stop
from rclpy.action import ActionClient
from rclpy.node import Node
from test_control_node_dds import result_of

from m3_interfaces.action import Instruct
from m3_memory.graph.records import ClipEvidence, VoiceEvidence
from m3_memory.memory import Memory
from m3_memory.milvus.backend import MilvusBackend, MilvusConfig
from m3_memory.milvus.server import MilvusLiteServer
from m3_memory.search.embedder import TextEmbedder

S = 1_000_000_000
PREFIX = "control_fleet"


def store_clip(uri: str, robot: str, slot: int, spool: str, embedder: TextEmbedder, utterance: str) -> None:
    """One clip of one robot, in which a voice says utterance (the rules memorizer keeps it)."""
    config = MilvusConfig(uri=uri, collection_prefix=PREFIX, robot_id=robot, fleet_slot=slot, spool_dir=spool)
    memory = Memory(MilvusBackend(config, embedder.dim), embedder)
    try:
        vector = np.random.default_rng(slot).normal(size=256)
        voice = VoiceEvidence("voice_1", 2 * S, 4 * S, utterance, 0.9, list(vector / np.linalg.norm(vector)), 1)
        assert memory.ingest(ClipEvidence(0, 0, 30 * S, voices=[voice])) is not None
    finally:
        memory.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("control_fleet")
    server = MilvusLiteServer(str(base / "milvus")).start()
    embedder = TextEmbedder()
    store_clip(server.uri, "robot_a", 1, str(base / "spool_a"), embedder, "good morning, I like green tea")
    store_clip(server.uri, "robot_b", 2, str(base / "spool_b"), embedder, "I put the keys in the drawer")
    params = {"memory_backend": "milvus", "milvus_uri": server.uri, "milvus_collection_prefix": PREFIX,
              "robot_id": "robot_a", "fleet_slot": 1, "milvus_spool_dir": str(base / "spool_a")}  # fmt: skip
    args = [arg for name, value in params.items() for arg in ("-p", f"{name}:={value}")]
    memory = subprocess.Popen([sys.executable, "-m", "m3_memory.memory_node", "--ros-args", *args])
    rclpy.init()
    node = Node("control_fleet_test")
    yield {"node": node}
    node.destroy_node()
    rclpy.try_shutdown()
    stop(memory)
    server.stop()


def ask(fleet, question: str, *control_params: str) -> Instruct.Result:
    """question to a control node (robot a's: its memory services are the defaults) started with these
    parameters, stopped after its answer."""
    args = [arg for param in control_params for arg in ("-p", param)]
    control = subprocess.Popen(
        [sys.executable, "-m", "m3_control.control_node", "--ros-args", "-p", "memory_timeout_s:=30.0", *args]
    )
    client = ActionClient(fleet["node"], Instruct, "/m3/instruct")
    try:
        assert client.wait_for_server(timeout_sec=60.0), "control node did not come up"
        system = {"node": fleet["node"], "client": client}
        goal = None
        for _ in range(2):  # right after the server came up, DDS can drop the goal's reply (its reply path
            # not matched yet: "failed to send response (timeout)" in CI); the goal is asked once more then
            future = client.send_goal_async(Instruct.Goal(instruction=question, max_rounds=2))
            deadline = time.monotonic() + 15.0
            while not future.done() and time.monotonic() < deadline:
                rclpy.spin_once(fleet["node"], timeout_sec=0.05)
            if future.done():
                goal = future.result()
                break
        assert goal is not None, "the goal was not answered"
        response = result_of(system, goal)
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.error_message
        return response.result
    finally:
        client.destroy()
        stop(control)


def test_an_instruction_to_robot_a_is_answered_from_robot_b_memory(fleet):
    result = ask(fleet, "Where are the keys?")  # search_robot_id "" (default): the whole fleet
    assert "drawer" in result.answer, result.answer
    assert any(e.startswith("robot_b/episodic_") for e in result.evidence_ids), list(result.evidence_ids)
    own = ask(fleet, "Where are the keys?", "search_robot_id:=robot_a")  # robot a's memories only
    assert "drawer" not in own.answer and not any(e.startswith("robot_b/") for e in own.evidence_ids)


def test_m3_ask_robot_searches_that_robot_only(fleet, capsys):
    """`m3 ask --robot` (the goal's robot_id) overrides the control node's search_robot_id."""
    from m3_control import ask as m3_ask

    control = subprocess.Popen([sys.executable, "-m", "m3_control.control_node", "--ros-args", "-p",
                                "memory_timeout_s:=30.0", "-p", "search_robot_id:=robot_a"])  # fmt: skip
    try:
        assert m3_ask.main(["Where are the keys?", "--max-rounds", "2", "--robot", "robot_b", "--json",
                            "--wait", "60"]) == 0  # fmt: skip
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert "drawer" in out["answer"] and any(e.startswith("robot_b/") for e in out["evidence_ids"])
    finally:
        stop(control)
