"""Issue 21, D7: `m3 play` of a recording whose topics nobody subscribes to (a perception node left on
raw images while the recording has compressed ones) said nothing. Now one stderr line names the played
topics without a subscriber, a few seconds in (or at the end, when sooner). Real `m3 play` subprocesses
and a real rclpy subscriber, in a ROS domain of their own."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from std_msgs.msg import String
from test_bag_channel_ids import COUNT, TOPICS, write_bag

pytestmark = pytest.mark.reliability
DOMAIN = random.randint(120, 200)


def _play(bag, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROS_DOMAIN_ID": str(DOMAIN), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    command = ["m3", "play", str(bag), "--rate", "0", *extra]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1])["published"] == COUNT
    return result


def test_play_names_the_topics_nobody_subscribes_to(tmp_path):
    write_bag(tmp_path / "bag")
    result = _play(tmp_path / "bag", "--wait-for-subscribers", "0")
    lines = [line for line in result.stderr.splitlines() if "nobody subscribes to" in line]
    assert lines == [
        f"m3 play: nobody subscribes to {', '.join(sorted(TOPICS))}: those messages go nowhere "
        "(a node configured for another topic or transport?)"
    ]


def test_a_subscribed_topic_is_not_named(tmp_path):
    write_bag(tmp_path / "bag")
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=DOMAIN)
    node = rclpy.create_node("d7_listener", context=context)
    received: list[str] = []
    node.create_subscription(String, TOPICS[0], lambda m: received.append(m.data), 100)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.1)

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        # Waits its 5 s for a subscriber on every topic: TOPICS[1] never gets one, TOPICS[0] is discovered.
        result = _play(tmp_path / "bag", "--wait-for-subscribers", "5")
        deadline = time.monotonic() + 5
        while len(received) < COUNT // 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        spinner.join()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    assert f"m3 play: nobody subscribes to {TOPICS[1]}:" in result.stderr
    assert TOPICS[0] not in result.stderr
    assert len(received) == COUNT // 2
