"""Spinning a test node until something happens, and one service call: shared by the DDS tests."""

from __future__ import annotations

import time

import rclpy
from rclpy.node import Node


def spin_until(node: Node, predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        rclpy.spin_once(node, timeout_sec=0.05)


def call(node: Node, srv_type, name: str, request):
    client = node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=30.0)
    future = client.call_async(request)
    spin_until(node, future.done, 60)
    node.destroy_client(client)
    return future.result()
