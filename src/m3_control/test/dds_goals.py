"""What the control node's DDS tests share: spinning a client node of the default context until something
holds, and an Instruct goal sent and waited for to its result."""

from __future__ import annotations

import time

import rclpy
from rclpy.action import ActionClient
from rclpy.node import Node

from m3_interfaces.action import Instruct


def spin_until(node: Node, predicate, timeout_s: float = 30.0) -> None:
    """Spin `node` until predicate() is true; the test fails after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        rclpy.spin_once(node, timeout_sec=0.05)


def instruct(node: Node, client: ActionClient, goal: Instruct.Goal, timeout_s: float = 30.0) -> Instruct.Result:
    """Send `goal`, wait for it to be accepted and then for its result."""
    sent = client.send_goal_async(goal)
    spin_until(node, sent.done, timeout_s)
    result = sent.result().get_result_async()
    spin_until(node, result.done, timeout_s)
    return result.result().result
