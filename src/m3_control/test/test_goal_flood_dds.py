"""Goals sent together are never lost: 50 client processes send one Instruct goal each at the same moment
to the real control node (its console entry point, a scripted model over HTTP), once under each goal policy.

Every client must hear back: accepted and answered (SUCCEEDED with its own answer; under preempt, ABORTED
with PREEMPTED and a reason) or rejected. With rclpy's default services QoS (depth 10, before
action_queue_depth) DDS dropped goal requests beyond the 10th of a burst and their clients waited forever.

DDS set-up of the processes here, in the test's own ROS_DOMAIN_ID: a Fast DDS profile (LOOPBACK_PROFILE) with
UDP on 127.0.0.1 only and discovery by unicast to 127.0.0.1 over 120 participant ports, because
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST finds only about 32 processes per host (Fast DDS's initial-peers
range) and any wider range would send discovery beyond this machine; UDP only, because a Fast DDS
shared-memory port left half-made by a process killed in an earlier run of the domain hangs every later
participant that opens it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from action_msgs.msg import GoalStatus
from fixtures import ChatServer, stop

from m3_interfaces.action import Instruct

HERE = Path(__file__).parent
CLIENTS = 50
POLICIES = ("queue", "reject", "preempt")
MODEL_DELAY_S = 0.05  # per goal: under queue the 50 run one after the other


def answer_each(body: dict):
    """Scripted model: answers at once (max_rounds 1), naming the goal it answers ('flood queue #7'). It
    says it does not know: with no memory searched, the loop's answer check replaces any other answer."""
    question = body["messages"][1]["content"].removeprefix("Question: ")
    return ("delay", MODEL_DELAY_S, f"Action: [Answer]\nContent: I don't know the answer to {question}")


LOOPBACK_PROFILE = """<?xml version="1.0" encoding="UTF-8" ?>
<profiles xmlns="http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles">
  <transport_descriptors>
    <transport_descriptor>
      <transport_id>loopback_udp</transport_id>
      <type>UDPv4</type>
      <interfaceWhiteList><address>127.0.0.1</address></interfaceWhiteList>
      <maxInitialPeersRange>120</maxInitialPeersRange>
    </transport_descriptor>
  </transport_descriptors>
  <participant profile_name="loopback_flood" is_default_profile="true">
    <rtps>
      <userTransports><transport_id>loopback_udp</transport_id></userTransports>
      <useBuiltinTransports>false</useBuiltinTransports>
      <builtin>
        <initialPeersList>
          <locator><udpv4><address>127.0.0.1</address></udpv4></locator>
        </initialPeersList>
      </builtin>
    </rtps>
  </participant>
</profiles>
"""


@pytest.fixture(scope="module")
def rounds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """One control node; one flood of CLIENTS processes, a round per policy. Policy -> that round."""
    profile = tmp_path_factory.mktemp("dds") / "loopback.xml"
    profile.write_text(LOOPBACK_PROFILE)
    env = dict(
        os.environ,
        ROS_AUTOMATIC_DISCOVERY_RANGE="SYSTEM_DEFAULT",  # the profile's discovery, as it is
        FASTDDS_DEFAULT_PROFILES_FILE=str(profile),
        FASTRTPS_DEFAULT_PROFILES_FILE=str(profile),
    )
    started = time.monotonic()
    with ChatServer(responder=answer_each) as chat:
        control = subprocess.Popen(
            [sys.executable, "-m", "m3_control.control_node", "--ros-args", "-p", "backend:=openai",
             "-p", f"endpoint:={chat.endpoint}", "--log-level", "warn"],
            env=env,
        )  # fmt: skip
        try:
            flood = [str(HERE / "goal_flood.py"), "--clients", str(CLIENTS), "--policies", ",".join(POLICIES)]
            run = subprocess.run([sys.executable, *flood], env=env, capture_output=True, text=True, timeout=300)
        finally:
            stop(control)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])["rounds"]
    print(f"\nflood: {[(r['policy'], r['elapsed_s']) for r in result]}, {time.monotonic() - started:.1f} s in all")
    return {r["policy"]: r for r in result}


def kinds(round_: dict) -> Counter:
    """What each client heard back, counted; fails on a lost goal, another client's answer, or a slow round."""
    assert sorted(o["client"] for o in round_["outcomes"]) == list(range(CLIENTS)), "a client never reported"
    counts: Counter = Counter()
    for o in round_["outcomes"]:
        assert o["outcome"] in ("accepted", "rejected"), f"client {o['client']} lost its goal: {o}"
        if o["outcome"] == "rejected":
            counts["rejected"] += 1
        elif o["error_code"] == Instruct.Result.PREEMPTED:
            assert o["status"] == GoalStatus.STATUS_ABORTED and "preempted" in o["error_message"], o
            counts["preempted"] += 1
        else:
            assert (o["status"], o["error_code"]) == (GoalStatus.STATUS_SUCCEEDED, Instruct.Result.SUCCEEDED), o
            assert o["answer"] == f"I don't know the answer to flood {round_['policy']} #{o['client']}"  # its own
            counts["succeeded"] += 1
    assert round_["elapsed_s"] < 30.0  # 50 goals of 0.05 s each; a lost goal would hold its client 40 s
    return counts


def test_queue_answers_all_fifty(rounds):
    assert kinds(rounds["queue"]) == {"succeeded": CLIENTS}


def test_reject_answers_or_rejects_every_goal(rounds):
    counts = kinds(rounds["reject"])
    assert counts["rejected"] >= 1 and counts["succeeded"] >= 1 and counts["preempted"] == 0, counts


def test_preempt_ends_every_replaced_goal_preempted(rounds):
    counts = kinds(rounds["preempt"])
    assert counts["preempted"] >= 1 and counts["succeeded"] >= 1 and counts["rejected"] == 0, counts
