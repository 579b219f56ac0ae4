"""A separate client process for test_node_dds.py: fires many search_node requests at once.

argv: <client number> <requests> <json list of [query, expected top text]>. Prints one JSON line
{"answered": n, "wrong": [...]} and exits 0.
"""

from __future__ import annotations

import json
import sys
import time

import rclpy
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

from m3_interfaces.srv import SearchNode


def main() -> None:
    number, count, cases = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
    rclpy.init()
    node = Node(f"memory_search_client_{number}")
    qos = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST, depth=1000)
    client = node.create_client(SearchNode, "/m3/memory/search_node", qos_profile=qos)
    if not client.wait_for_service(timeout_sec=30.0):
        print(json.dumps({"answered": 0, "wrong": ["service not found"]}), flush=True)
        return
    futures = []
    for i in range(count):
        query, expected = cases[(i + number) % len(cases)]
        request = SearchNode.Request(query=query, kinds=["semantic"], top_k=3)
        futures.append((expected, client.call_async(request)))  # all in flight together
    deadline = time.monotonic() + 120
    while not all(f.done() for _, f in futures) and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    wrong = []
    answered = 0
    for expected, future in futures:
        if not future.done():
            wrong.append("no answer")
            continue
        answered += 1
        response = future.result()
        top = response.items[0].text if response.items else ""
        if response.error_code != SearchNode.Response.OK or top != expected:
            wrong.append(f"expected {expected!r}, got {top!r} (code {response.error_code})")
    print(json.dumps({"answered": answered, "wrong": wrong}), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
