"""spinning: nodes spun on a thread of their own, stopped in order before they are destroyed.

The defect it replaces: a test that removed and destroyed its node while a shared `executor.spin` thread
was building a wait set killed that thread (InvalidHandle, "destruction was requested"); every later
test's nodes then got no callback at all (a CI run's perception node logged "frames received 0")."""

from __future__ import annotations

import threading
import time

import pytest
import rclpy
from rclpy.node import Node


@pytest.fixture(scope="module")
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


def test_a_running_callback_ends_before_its_node_is_destroyed(ros):
    from m3_runtime.node_shutdown import spinning

    started, events = threading.Event(), []
    node = Node("spinning_slow")

    def slow() -> None:
        started.set()
        time.sleep(0.5)
        events.append(("callback ended", node.handle is not None))

    node.create_timer(0.01, slow)
    destroy = node.destroy_node
    node.destroy_node = lambda: (events.append(("destroyed", True)), destroy())[1]
    with spinning(node):
        assert started.wait(10.0)
    assert events[:2] == [("callback ended", True), ("destroyed", True)], events


def test_nodes_come_and_go_many_times_and_every_one_is_served(ros):
    """Fifty short-lived nodes with fast timers, each spun, stopped and destroyed while a long-lived
    node goes on in its own spinning block: every one of them fires, and so does the long-lived one."""
    from m3_runtime.node_shutdown import spinning

    keeper_ticks = []
    keeper = Node("spinning_keeper")
    keeper.create_timer(0.005, lambda: keeper_ticks.append(1))
    with spinning(keeper) as executor:
        for k in range(50):
            ticks = threading.Event()
            node = Node(f"spinning_short_{k}")
            node.create_timer(0.001, ticks.set)
            with spinning(node):
                assert ticks.wait(10.0), f"node {k} was never served"
        before = len(keeper_ticks)
        time.sleep(0.2)
        assert len(keeper_ticks) > before
        late, destroyed = Node("spinning_added_later"), []
        destroy = late.destroy_node
        late.destroy_node = lambda: (destroyed.append(late.get_name()), destroy())[1]
        executor.add_node(late)  # added inside the block: destroyed at its end all the same
    assert destroyed == ["spinning_added_later"]
