"""Many Instruct clients, each its own process and rclpy context, sending one goal each at the same moment.

Run: python goal_flood.py --clients 50 --policies queue,reject,preempt [--instruction flood] [--timeout 40]
rclpy is imported once here, then each client is a forked process (no interpreter start of its own) with
its own Context, node and DDS participant, and the action QoS that `m3 ask` uses (action_qos.client_qos).
One round per policy: this process sets the control node's goal_policy, then every client, having found
the action server, sends its goal at the same moment ("flood <policy> #<client>"). The last stdout line is
JSON: {"rounds": [{"policy", "elapsed_s", "outcomes": [...]}]}, one outcome per client and round:
"accepted" (with status, error_code, error_message, answer), "rejected", or a loss: "no_server",
"no_goal_response" (the goal or its answer was dropped), "no_result" (the result was).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import signal
import sys
import time

import rclpy
from rclpy.action import ActionClient
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient

from m3_control.action_qos import client_qos
from m3_interfaces.action import Instruct


def spin_until(executor: SingleThreadedExecutor, future, deadline: float) -> bool:
    executor.spin_until_future_complete(future, timeout_sec=max(0.0, deadline - time.monotonic()))
    return future.done()


def send_one(action: ActionClient, executor: SingleThreadedExecutor, instruction: str, timeout: float) -> dict:
    """One goal, start to end; what came back."""
    sent_at = time.monotonic()
    deadline = sent_at + timeout
    sent = action.send_goal_async(Instruct.Goal(instruction=instruction, max_rounds=1))
    if not spin_until(executor, sent, deadline):
        return {"outcome": "no_goal_response"}
    handle = sent.result()
    if not handle.accepted:
        return {"outcome": "rejected"}
    result = handle.get_result_async()
    if not spin_until(executor, result, deadline):
        return {"outcome": "no_result"}
    response = result.result()
    return {
        "outcome": "accepted",
        "result_s": round(time.monotonic() - sent_at, 3),
        "status": response.status,
        "error_code": response.result.error_code,
        "error_message": response.result.error_message,
        "answer": response.result.answer,
    }


def client(index: int, args: argparse.Namespace, policies: list[str], ready: mp.Queue, go: list, outcomes: mp.Queue):
    """One client process: find the server, then per round wait for `go`, send one goal, report."""
    context = Context()
    rclpy.init(args=[], context=context)
    node = Node(f"goal_flood_{index}", context=context, start_parameter_services=False, enable_rosout=False)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        action = ActionClient(node, Instruct, args.action, **client_qos())
        found = action.wait_for_server(timeout_sec=args.timeout)
        ready.put(index)
        for number, policy in enumerate(policies):
            if not go[number].wait(args.timeout * (number + 2)):
                break  # the orchestrator gave up
            outcome = {"outcome": "no_server"}
            if found:
                outcome = send_one(action, executor, f"{args.instruction} {policy} #{index}", args.timeout)
            outcomes.put({"round": number, "client": index, **outcome})
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def set_policy(node: Node, policy: str, timeout: float) -> None:
    params = AsyncParameterClient(node, "control_node")
    if not params.wait_for_services(timeout_sec=timeout):
        raise SystemExit("goal_flood: control_node's parameter services not found")
    # Asked again every 5 s (setting it twice is harmless): Fast DDS can drop a service's first reply
    # when the response reader is not matched yet ("failed to send response (timeout)").
    deadline = time.monotonic() + timeout
    while True:
        future = params.set_parameters([Parameter("goal_policy", value=policy)])
        rclpy.spin_until_future_complete(node, future, timeout_sec=min(5.0, max(0.0, deadline - time.monotonic())))
        if future.done() or time.monotonic() >= deadline:
            break
    if not future.done() or not future.result().results[0].successful:
        raise SystemExit(f"goal_flood: could not set goal_policy {policy}")


def stop(process: mp.Process) -> None:
    """Let a client end by itself; else SIGINT (rclpy shuts down cleanly), SIGKILL last: a process killed
    while it holds a Fast DDS shared-memory port lock can hang later participants on that port."""
    process.join(timeout=20)
    if process.is_alive():
        os.kill(process.pid, signal.SIGINT)
        process.join(timeout=10)
    if process.is_alive():
        process.kill()
        process.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--policies", default="queue", help="comma-separated goal policies, one round each")
    parser.add_argument("--instruction", default="flood")
    parser.add_argument("--action", default="/m3/instruct")
    parser.add_argument("--timeout", type=float, default=40.0, help="seconds for discovery, and per goal")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds between all clients ready and sending")
    args = parser.parse_args()
    policies = args.policies.split(",")
    fork = mp.get_context("fork")
    ready, outcomes, go = fork.Queue(), fork.Queue(), [fork.Event() for _ in policies]
    processes = [
        fork.Process(target=client, args=(i, args, policies, ready, go, outcomes)) for i in range(args.clients)
    ]
    for process in processes:
        process.start()
    rclpy.init(args=[])  # after the forks: the clients share no DDS state with this process
    node = Node("goal_flood")
    rounds = []
    try:
        for _ in processes:
            ready.get(timeout=args.timeout + 30)
        for number, policy in enumerate(policies):
            set_policy(node, policy, args.timeout)
            # Discovery is asymmetric: a client that sees the server may not be seen by it yet, and
            # rmw_fastrtps then drops the goal response after 100 ms. m3 ask settles likewise.
            time.sleep(args.settle)
            start = time.monotonic()
            go[number].set()
            got = []
            try:
                while len(got) < len(processes):
                    got.append(outcomes.get(timeout=args.timeout + 30))
            except queue.Empty:
                pass  # a client never reported: the caller sees it missing
            rounds.append({"policy": policy, "elapsed_s": round(time.monotonic() - start, 2), "outcomes": got})
    finally:
        for process in processes:
            stop(process)
        node.destroy_node()
        rclpy.try_shutdown()
    print(json.dumps({"rounds": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
