"""`m3 bench` for control: loop overhead per round, and an Instruct goal's round trip through DDS.

round_overhead_ms: time the loop spends per round itself (bookkeeping, prompt assembly, plan
checks), with an instant scripted reasoner and an in-memory store, so model and memory latency
are excluded. action_roundtrip_ms: median time from sending a goal to receiving its result, with
the control node (extractive back-end) and a small memory service node in this process. The LAST
stdout line is a JSON object with both figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

from m3_control.loop import LoopConfig, run_loop
from m3_control.memory_client import Clip, Memory
from m3_control.reasoner import Answer, LoopState, Search
from m3_control.skills import load_skills

NAMES = (
    "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Ken Laura Mallory Nina Oscar Peggy Quinn Rupert Sybil Trent"
)
CLIPS = [
    Clip(
        i,
        0.8,
        (
            Memory(f"episodic_{2 * i}", "episodic", f"<face_{i}> put item {i} in the drawer of room {i}.", i),
            Memory(f"semantic_{2 * i + 1}", "semantic", f"<face_{i}> is named {NAMES.split()[i]}.", i),
        ),
    )
    for i in range(20)
]


class ListMemory:
    """In-memory MemoryClient: returns the first top_k clips (no scoring: the loop is what is measured)."""

    def search_clip(self, query, top_k=2, threshold=0.5, before_clip=-1, conversation_id="", before_stamp_ns=0):
        return CLIPS[:top_k]

    def search_node(self, query, kinds=(), top_k=20, before_clip=-1, before_stamp_ns=0):
        return [m for c in CLIPS for m in c.memories][:top_k]


class ScriptedReasoner:
    """Searches a new query each round, answers in the last one."""

    def decide(self, state: LoopState) -> Search | Answer:
        if state.must_answer:
            return Answer("<face_1> put item 1 in the drawer of room 1.")
        return Search(f"query {state.round}")


def round_overhead_ms(goals: int, rounds: int) -> float:
    skills = load_skills()
    samples: list[float] = []
    for _ in range(goals):
        result = run_loop("Where is item 1?", ScriptedReasoner(), ListMemory(), skills, LoopConfig(max_rounds=rounds))
        samples.extend(result.timings_ms)
    return statistics.median(samples)


def action_roundtrip_ms(goals: int) -> float:
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.context import Context
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    from m3_control.control_node import ControlNode
    from m3_interfaces.action import Instruct
    from m3_interfaces.msg import ClipMemory, MemoryItem
    from m3_interfaces.srv import GetEntity, SearchClip

    context = Context()
    rclpy.init(args=[], context=context)
    memory_node = Node("bench_memory", context=context)

    def on_search(request, response):
        for clip in CLIPS[: request.top_k]:
            items = [
                MemoryItem(node_id=m.node_id, kind=m.kind, text=m.text, clip_index=m.clip_index, score=0.8)
                for m in clip.memories
            ]
            response.clips.append(ClipMemory(clip_index=clip.clip_index, score=clip.score, episodic=items))
        return response

    def on_get_entity(request, response):
        response.error_code = GetEntity.Response.UNKNOWN_ENTITY  # names come from the memories themselves
        return response

    memory_node.create_service(SearchClip, "/m3/memory/search_clip", on_search)
    memory_node.create_service(GetEntity, "/m3/memory/get_entity", on_get_entity)
    control = ControlNode(context=context)
    client_node = Node("bench_client", context=context)
    client = ActionClient(client_node, Instruct, "/m3/instruct")
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    for node in (memory_node, control, client_node):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    samples: list[float] = []
    try:
        if not client.wait_for_server(timeout_sec=20.0):
            raise RuntimeError("the in-process control node did not serve /m3/instruct")
        for _ in range(goals):
            done = threading.Event()
            start = time.perf_counter()
            sent = client.send_goal_async(Instruct.Goal(instruction="Where did Bob put item 1?", max_rounds=3))
            sent.add_done_callback(
                lambda f, done=done: f.result().get_result_async().add_done_callback(lambda _: done.set())
            )
            if not done.wait(30.0):
                raise RuntimeError("no result within 30 s")
            samples.append((time.perf_counter() - start) * 1000)
    finally:
        # Stop the spinning thread before destroying what it waits on (else a rare abort at exit).
        executor.shutdown(timeout_sec=10.0)
        spinner.join(timeout=10.0)
        for node in (memory_node, control, client_node):
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m3 bench control", description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=20, help="goals per figure (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per goal for the loop figure (default 5)")
    parser.add_argument("--no-ros", action="store_true", help="measure only the loop overhead")
    args = parser.parse_args(argv)
    figures = {"round_overhead_ms": round(round_overhead_ms(args.goals, args.rounds), 4), "goals": args.goals}
    print(f"loop overhead per round: {figures['round_overhead_ms']} ms (median)", file=sys.stderr)
    if not args.no_ros:
        figures["action_roundtrip_ms"] = round(action_roundtrip_ms(args.goals), 3)
        print(f"action round trip: {figures['action_roundtrip_ms']} ms (median)", file=sys.stderr)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
