"""The three nodes are managed (lifecycle) nodes, driven here as `ros2 lifecycle set` or a lifecycle
manager would: through their standard /<node>/change_state and /<node>/get_state services, from a
client node over DDS. Each step is checked on what another participant sees (topics, services, the
action server, input being processed, the store on disk), not only on the state the node reports:
  unconfigured -> configure -> inactive (models loaded, store open; no input taken, nothing served)
  -> activate -> active (serving) -> deactivate (stops serving) -> cleanup (released) -> shutdown.
A node that cannot be configured answers the transition with success false and stays unconfigured."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import rclpy
from builtin_interfaces.msg import Time
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.action import ActionClient
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from m3_interfaces.action import Instruct
from m3_interfaces.msg import AudioChunk, VoiceSegment
from m3_interfaces.srv import GetStats
from m3_runtime.node_shutdown import spinning

TIMEOUT_S = 30.0
ABSENT_S = 2.0  # how long something that must not appear is given to appear


def wait_for(predicate: Callable[[], bool], timeout_s: float = TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(scope="module")
def ros_context() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.fixture
def ros(ros_context) -> Iterator[tuple[MultiThreadedExecutor, Node]]:
    """An executor thread of this test's own spinning the driving client node and the nodes under test;
    after the test it stops, then destroys them all (a node destroyed under a spinning executor can kill
    its thread: m3_runtime.node_shutdown.spinning)."""
    client = Node("lifecycle_driver")
    with spinning(client) as executor:
        yield executor, client


class Driver:
    """The standard lifecycle services of one node, called from the client node."""

    def __init__(self, client: Node, node_name: str) -> None:
        self.change = client.create_client(ChangeState, f"/{node_name}/change_state")
        self.get = client.create_client(GetState, f"/{node_name}/get_state")
        assert self.change.wait_for_service(timeout_sec=TIMEOUT_S) and self.get.wait_for_service(timeout_sec=TIMEOUT_S)
        self._handshake()

    def _handshake(self) -> None:
        """Ask get_state (idempotent) until one answer comes back. DDS can report a service as available
        before the server's reply writer has matched this client, and a request sent in that window is
        answered into the void (seen in CI as a 120 s wait); once one reply arrives, both paths are matched,
        so the transitions that follow (which must not be sent twice) are not lost."""
        deadline = time.monotonic() + 4 * TIMEOUT_S
        while time.monotonic() < deadline:
            if self._call(self.get, GetState.Request(), timeout_s=2.0) is not None:
                return
        raise AssertionError(f"{self.get.srv_name} never answered")

    @staticmethod
    def _call(client, request, timeout_s: float | None = None):
        """The reply, or None after `timeout_s`; with no `timeout_s`, fail after 120 s (configure loads models)."""
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _: done.set())
        if timeout_s is not None:
            if done.wait(timeout_s):
                return future.result()
            client.remove_pending_request(future)
            return None
        assert done.wait(120.0), f"{client.srv_name} did not answer"
        return future.result()

    def set(self, label: str) -> bool:
        """`ros2 lifecycle set <node> <label>`: whether the transition succeeded."""
        return self._call(self.change, ChangeState.Request(transition=Transition(label=label))).success

    def state(self) -> str:
        return self._call(self.get, GetState.Request()).current_state.label


@pytest.fixture
def node_under_test(ros) -> Callable:
    """Add a node to the test's executor (which destroys it after the test)."""
    executor, _ = ros

    def add(node):
        executor.add_node(node)
        return node

    return add


def memory_stats(memory_dir: Path) -> dict:
    result = subprocess.run(["m3", "memory", "stats", str(memory_dir)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def utterance(start_s: int, text: str) -> VoiceSegment:
    msg = VoiceSegment(voice_id="voice_1", transcript=text, asr_confidence=0.9, embedding=[0.6, 0.8])
    msg.start, msg.end = Time(sec=start_s), Time(sec=start_s + 2)
    msg.header.stamp = msg.end
    return msg


def test_memory_node_lifecycle(ros, node_under_test, tmp_path):
    from m3_memory.memory_node import MemoryNode

    _, client = ros
    memory_dir = tmp_path / "memory"
    node = node_under_test(MemoryNode(parameter_overrides=[Parameter("memory_dir", value=str(memory_dir))]))
    driver = Driver(client, "memory_node")
    stats = client.create_client(GetStats, "/m3/memory/get_stats")
    voices = client.create_publisher(VoiceSegment, "/m3/voices", 10)

    assert driver.state() == "unconfigured"
    assert not (memory_dir / "memory.sqlite3").exists()  # the store opens on configure, not before
    assert driver.set("configure") and driver.state() == "inactive"
    assert (memory_dir / "memory.sqlite3").exists()
    assert not stats.wait_for_service(timeout_sec=ABSENT_S)  # inactive: nothing served ...
    assert voices.get_subscription_count() == 0  # ... and no evidence taken

    assert driver.set("activate") and driver.state() == "active"
    assert stats.wait_for_service(timeout_sec=TIMEOUT_S)
    reply = Driver._call(stats, GetStats.Request())
    assert reply.error_code == GetStats.Response.OK and reply.clips == 0
    assert wait_for(lambda: voices.get_subscription_count() > 0)
    voices.publish(utterance(100, "Alice put the keys on the table."))
    assert wait_for(lambda: node.windows.last_stamp_ns > 0)  # taken into the open clip

    assert driver.set("deactivate") and driver.state() == "inactive"
    assert wait_for(lambda: not stats.service_is_ready() and voices.get_subscription_count() == 0)
    assert driver.set("cleanup") and driver.state() == "unconfigured"
    assert not (memory_dir / "memory.sqlite3-wal").exists()  # closed: WAL checkpointed, the file released
    assert memory_stats(memory_dir)["clips"] == 1  # the open clip was stored, not dropped
    assert driver.set("shutdown") and driver.state() == "finalized"


def test_perception_node_lifecycle(ros, node_under_test):
    from m3_perception.perception_node import PerceptionNode

    _, client = ros
    node = node_under_test(PerceptionNode())
    driver = Driver(client, "perception_node")
    audio = client.create_publisher(AudioChunk, "/audio", 10)
    bad_chunk = AudioChunk(sample_rate=0, channels=1, data=[0, 0])  # a bad sample rate: dropped, counted
    bad_chunk.header.stamp = Time(sec=10)

    assert driver.state() == "unconfigured"
    assert client.count_publishers("/m3/faces") == 0 and node.engine is None
    assert driver.set("configure") and driver.state() == "inactive"
    assert node.engine is not None  # models loaded
    assert wait_for(lambda: client.count_publishers("/m3/faces") == 1)
    assert not wait_for(lambda: client.count_subscribers("/audio") > 0, ABSENT_S)  # inactive: no input

    assert driver.set("activate") and driver.state() == "active"
    assert wait_for(lambda: audio.get_subscription_count() > 0)
    audio.publish(bad_chunk)
    assert wait_for(lambda: node.bad_chunks == 1)  # input processed

    assert driver.set("deactivate") and driver.state() == "inactive"
    assert wait_for(lambda: client.count_subscribers("/audio") == 0)
    audio.publish(bad_chunk)
    assert not wait_for(lambda: node.bad_chunks > 1, ABSENT_S)
    assert driver.set("cleanup") and driver.state() == "unconfigured"
    assert node.engine is None and wait_for(lambda: client.count_publishers("/m3/faces") == 0)
    assert driver.set("shutdown") and driver.state() == "finalized"


def test_control_node_lifecycle(ros, node_under_test):
    from m3_control.control_node import ControlNode
    from m3_control.direct_memory_client import DirectMemoryClient

    _, client = ros
    node_under_test(ControlNode(memory_client=DirectMemoryClient(None, "no store in this test")))
    driver = Driver(client, "control_node")
    instruct = ActionClient(client, Instruct, "/m3/instruct")

    assert driver.state() == "unconfigured"
    assert driver.set("configure") and driver.state() == "inactive"
    assert not instruct.wait_for_server(timeout_sec=ABSENT_S)  # inactive: no action server

    assert driver.set("activate") and driver.state() == "active"
    assert instruct.wait_for_server(timeout_sec=TIMEOUT_S)
    done = threading.Event()
    goal = instruct.send_goal_async(Instruct.Goal(instruction="Where are the keys?"))
    goal.add_done_callback(lambda _: done.set())
    assert done.wait(TIMEOUT_S) and goal.result().accepted
    result = goal.result().get_result_async()
    assert wait_for(result.done)  # served: the goal ran to an end (memory is unavailable here)
    assert result.result().result.error_code == Instruct.Result.MEMORY_UNAVAILABLE

    assert driver.set("deactivate") and driver.state() == "inactive"
    assert wait_for(lambda: not instruct.server_is_ready())
    assert driver.set("cleanup") and driver.state() == "unconfigured"
    assert driver.set("shutdown") and driver.state() == "finalized"
    instruct.destroy()


@pytest.mark.parametrize(
    ("node_name", "bad"),
    [
        ("perception_node", Parameter("sensor_reliability", value="sometimes")),
        ("memory_node", Parameter("memorizer", value="magic")),
        ("control_node", Parameter("goal_policy", value="lottery")),
        ("memory_node", Parameter("robot_id", value="robot/a")),  # written into Milvus keys and filters
        ("control_node", Parameter("search_robot_id", value="robot a")),
    ],
)
def test_a_node_that_cannot_configure_says_so_and_stays_unconfigured(ros, node_under_test, tmp_path, node_name, bad):
    from m3_control.control_node import ControlNode
    from m3_memory.memory_node import MemoryNode
    from m3_perception.perception_node import PerceptionNode

    _, client = ros
    overrides = [bad] + ([Parameter("memory_dir", value=str(tmp_path / "m"))] if node_name == "memory_node" else [])
    make = {"perception_node": PerceptionNode, "memory_node": MemoryNode, "control_node": ControlNode}[node_name]
    node = node_under_test(make(parameter_overrides=overrides))
    driver = Driver(client, node_name)
    assert not driver.set("configure")
    assert driver.state() == "unconfigured"
    assert bad.value in str(node.configure_error)  # the reason, also logged as "cannot configure: ..."
    assert driver.set("shutdown") and driver.state() == "finalized"


def test_node_command_with_autostart_false_waits_for_a_lifecycle_manager(ros, tmp_path):
    """`memory_node --ros-args -p autostart:=false` (what the launch file starts) stays unconfigured until
    driven, as with `ros2 lifecycle set /memory_node configure` then `activate`; SIGTERM then exits 0."""
    _, client = ros
    memory_dir = tmp_path / "memory"
    command = ["memory_node", "--ros-args", "-p", "autostart:=false", "-p", f"memory_dir:={memory_dir}"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        driver = Driver(client, "memory_node")
        stats = client.create_client(GetStats, "/m3/memory/get_stats")
        assert driver.state() == "unconfigured"
        assert not stats.wait_for_service(timeout_sec=ABSENT_S) and not memory_dir.exists()
        assert driver.set("configure") and driver.set("activate") and driver.state() == "active"
        assert stats.wait_for_service(timeout_sec=TIMEOUT_S)
        assert Driver._call(stats, GetStats.Request()).error_code == GetStats.Response.OK
        process.terminate()
        assert process.wait(timeout=60) == 0, process.communicate()[1][-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_direct_memory_transport_follows_the_memory_node_state(ros, node_under_test, tmp_path):
    """In `m3 run` the control loop searches the memory node's Memory directly: only while that node is
    active, as its services are only served then (MEMORY_UNAVAILABLE otherwise, not a closed store)."""
    from m3_control.direct_memory_client import DirectMemoryClient
    from m3_control.memory_client import MemoryUnavailable
    from m3_memory.memory_node import MemoryNode
    from m3_runtime.managed_node import bring_up

    node = node_under_test(MemoryNode(parameter_overrides=[Parameter("memory_dir", value=str(tmp_path / "m"))]))
    direct = DirectMemoryClient.of_node(node)
    with pytest.raises(MemoryUnavailable, match="memory_node is not active"):
        direct.search_clip("where are the keys?")
    bring_up(node)
    assert direct.search_clip("where are the keys?") == []  # an empty memory, searched
    node.trigger_deactivate()
    with pytest.raises(MemoryUnavailable, match="memory_node is not active"):
        direct.search_clip("where are the keys?")
    node.trigger_activate()
    node.trigger_deactivate()
    node.trigger_cleanup()  # reconfigured later: the client follows the new Memory
    bring_up(node)
    assert direct.search_clip("where are the keys?") == []


@pytest.mark.parametrize(
    ("command", "line"),
    [
        (
            ["m3", "run", "--nodes", "memory_node", "control_node", "--set", "control_node.goal_policy=lottery"],
            "m3 run: error: control_node cannot be configured: goal_policy 'lottery'",
        ),
        (
            ["control_node", "--ros-args", "-p", "goal_policy:=lottery"],
            "control_node: error: cannot start: goal_policy",
        ),
    ],
    ids=["m3-run", "node-command"],
)
def test_a_node_that_cannot_configure_stops_the_command_with_one_line(command, line, tmp_path):
    command = [*command, "--set", f"memory_node.memory_dir={tmp_path / 'm'}"] if command[0] == "m3" else command
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, result.stderr[-3000:]
    assert line in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not (tmp_path / "m" / "memory.sqlite3-wal").exists()  # the memory node it had started was shut down
