"""Issue 21, D4: one rule for robot ids on the memory services and the control node's goals, over real DDS.

`m3 run` serves a real memory node (SQLite: no fleet) and the control node in another process, the
control node reaching memory directly (the default) or through the services. "" and the memory's own
id ("robot") answer; another robot's id is refused on both: INVALID_ARGUMENT "no fleet" from the
services, and a goal ends INVALID_GOAL with that reason before the reasoner is asked. Before the fix
the goal ended SUCCEEDED with "I don't know: my memory holds nothing...".
"""

from __future__ import annotations

import signal
import subprocess

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from dds_goals import spin_until
from rclpy.action import ActionClient
from rclpy.node import Node

from m3_interfaces.action import Instruct
from m3_interfaces.srv import SearchClip, SearchNode

NO_FLEET = "no fleet: memory_backend is sqlite"
QUESTION = "Where did Alice put the car keys?"


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory):
    """A memory holding one clip (bulk ingest, real MiniLM embeddings)."""
    from m3_memory.graph.records import KIND_EPISODIC, ClipEvidence, MemoryDraft
    from m3_memory.memory import Memory

    path = tmp_path_factory.mktemp("robot_ids") / "memory"
    ns = 1_000_000_000
    memory = Memory.open(str(path))
    try:
        draft = MemoryDraft(KIND_EPISODIC, "Alice put the car keys in the hallway drawer.", ns, 2 * ns)
        assert memory.ingest_bulk([(ClipEvidence(0, 0, 30 * ns), [draft])]) == 1
    finally:
        memory.close()
    return path


@pytest.fixture(scope="module")
def ros():
    rclpy.init()
    node = Node("robot_ids_test")
    yield node
    node.destroy_node()
    rclpy.try_shutdown()


def goal(node: Node, client: ActionClient, robot_id: str):
    sent = client.send_goal_async(Instruct.Goal(instruction=QUESTION, robot_id=robot_id))
    spin_until(node, sent.done, 60)
    handle = sent.result()
    assert handle.accepted
    result = handle.get_result_async()
    spin_until(node, result.done, 120)
    return result.result()


def call(node: Node, srv_type, name: str, request):
    client = node.create_client(srv_type, name)
    try:
        assert client.wait_for_service(timeout_sec=60.0)
        future = client.call_async(request)
        spin_until(node, future.done, 60)
        return future.result()
    finally:
        node.destroy_client(client)


@pytest.mark.reliability
@pytest.mark.parametrize(("transport", "search_robot_id"), [("direct", ""), ("service", ""), ("service", "robot_b")])
def test_another_robots_id_is_refused_on_services_and_goals(memory_dir, ros, tmp_path, transport, search_robot_id):
    log = tmp_path / "run.log"
    command = ["m3", "run", "--nodes", "memory_node", "control_node", "--memory-transport", transport,
               "--set", f"memory_node.memory_dir={memory_dir}"]  # fmt: skip
    if search_robot_id:
        command += ["--set", f"control_node.search_robot_id={search_robot_id}"]
    with open(log, "w") as handle:
        run = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, text=True)
    client = ActionClient(ros, Instruct, "/m3/instruct")
    try:
        assert client.wait_for_server(timeout_sec=120.0), log.read_text()[-3000:]
        # the services: "" and the own id answer, robot_b is INVALID_ARGUMENT "no fleet"
        for robot_id in ("", "robot"):
            request = SearchClip.Request(query=QUESTION, robot_id=robot_id)
            found = call(ros, SearchClip, "/m3/memory/search_clip", request)
            assert found.error_code == SearchClip.Response.OK and found.clips, found.error_message
        for srv_type, name in ((SearchClip, "search_clip"), (SearchNode, "search_node")):
            refused = call(ros, srv_type, f"/m3/memory/{name}", srv_type.Request(query=QUESTION, robot_id="robot_b"))
            assert refused.error_code == srv_type.Response.INVALID_ARGUMENT and NO_FLEET in refused.error_message
        # the goals: the same rule, whether the id comes with the goal or from search_robot_id
        for robot_id in ("robot_b", "", "robot"):
            scope = robot_id or search_robot_id
            outcome = goal(ros, client, robot_id)
            result = outcome.result
            if scope == "robot_b":
                assert outcome.status == GoalStatus.STATUS_ABORTED, (robot_id, result.answer)
                assert result.error_code == Instruct.Result.INVALID_GOAL, result.error_message
                assert "robot_id 'robot_b' refused by memory" in result.error_message
                assert NO_FLEET in result.error_message and result.rounds_used == 0
                assert not result.answer
            else:
                assert outcome.status == GoalStatus.STATUS_SUCCEEDED, (robot_id, result.error_message)
                assert "hallway drawer" in result.answer, result.answer
    finally:
        client.destroy()
        run.send_signal(signal.SIGINT)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()
    text = log.read_text()
    expected = "DirectMemoryClient" if transport == "direct" else "memory services under /m3/memory"
    assert expected in text, text[-3000:]
