"""`m3 ask "question"`: a one-shot Instruct action client printing answer, plan and evidence (or --json).

Exit status: 0 answered, 1 the goal ended with an error code or was rejected, 2 no action server, no answer
to the goal, or a usage error. The action client keeps action_qos.DEFAULT_DEPTH responses, as the server does.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from m3_memory.robot_ids import robot_id_problem
from m3_memory.search.as_of import AsOfError, check_as_of

NAMES = {
    0: "SUCCEEDED",
    1: "INVALID_GOAL",
    2: "MODEL_UNREACHABLE",
    3: "MODEL_ERROR",
    4: "MEMORY_UNAVAILABLE",
    5: "CANCELED",
    6: "PREEMPTED",
    7: "NO_ANSWER",
    255: "INTERNAL_ERROR",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="m3 ask", description="Ask the running control node (action /m3/instruct).")
    parser.add_argument("question", help="question or command, e.g. 'Where did Alice put the keys?'")
    parser.add_argument("--max-rounds", type=int, default=5, help="retrieval rounds allowed, 1..20 (default 5)")
    parser.add_argument("--before-clip", type=int, default=-1, help="answer as of this clip index (default: no limit)")
    parser.add_argument(
        "--robot",
        default="",
        metavar="ID",
        help="search only this robot's memories (default: the control node's search_robot_id: the whole fleet)",
    )
    parser.add_argument("--action", default="/m3/instruct", help="action name (default /m3/instruct)")
    parser.add_argument(
        "--wait", type=float, default=10.0, help="seconds to wait for the action server, and for its goal answer (10)"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the result (default 300)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return parser


def pose_dict(step) -> dict:
    """A step's target_pose as plain numbers (frame, x, y [m], yaw [rad]) with what it came from."""
    pose = step.target_pose
    q = pose.pose.orientation
    yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
    return {
        "frame_id": pose.header.frame_id, "x": round(pose.pose.position.x, 3), "y": round(pose.pose.position.y, 3),
        "yaw": round(yaw, 3), "source": step.target_source, "evidence_id": step.target_evidence_id,
    }  # fmt: skip


def result_dict(result, feedback: list) -> dict:
    return {
        "answer": result.answer,
        "plan": [
            {"skill": s.skill, "target": s.target, "arguments": {kv.key: kv.value for kv in s.arguments}}
            | ({"target_pose": pose_dict(s)} if s.target_pose.header.frame_id else {})
            for s in result.plan
        ],
        "evidence_ids": list(result.evidence_ids),
        "rounds_used": result.rounds_used,
        "error_code": result.error_code,
        "error_name": NAMES.get(result.error_code, str(result.error_code)),
        "error_message": result.error_message,
        "answered_by": result.answered_by,
        "feedback": [
            {"round": f.round, "action": f.action, "query": f.query, "hit_count": f.hit_count} for f in feedback
        ],
    }


def print_text(out: dict) -> None:
    if out["error_code"]:
        print(f"error {out['error_name']}: {out['error_message']}")
        return
    print(out["answer"])
    if out["plan"]:
        print("plan:")
        for i, step in enumerate(out["plan"], 1):
            args = ", ".join(f"{k}={v}" for k, v in step["arguments"].items())
            print(f"  {i}. {step['skill']}({step['target']}{', ' + args if args else ''})")
            if pose := step.get("target_pose"):
                print(
                    f"     go to ({pose['x']}, {pose['y']}) yaw {pose['yaw']} in {pose['frame_id']}: {pose['source']}"
                )
    print(f"evidence: {', '.join(out['evidence_ids']) or 'none'}  (rounds: {out['rounds_used']})")
    why = {"view": "what perception sees now, not memory", "extractive": "the rules, in the model's place"}
    if out["answered_by"]:
        print(f"answered by: {out['answered_by']} ({why.get(out['answered_by'], 'not the configured reasoner')})")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 1 <= args.max_rounds <= 20:
        print("m3 ask: error: --max-rounds must be within 1..20", file=sys.stderr)
        return 2
    try:
        check_as_of(args.before_clip, 0)
    except AsOfError as error:
        print(f"m3 ask: error: --{str(error).replace('_', '-')}", file=sys.stderr)
        return 2
    if args.robot and (problem := robot_id_problem(args.robot)):
        print(f"m3 ask: error: --robot: {problem.replace('robot_id ', '', 1)}", file=sys.stderr)
        return 2
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from m3_control.action_qos import client_qos
    from m3_interfaces.action import Instruct

    context = Context()
    rclpy.init(args=[], context=context)
    node = Node("m3_ask", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    feedback: list = []
    try:
        client = ActionClient(node, Instruct, args.action, **client_qos())
        if not client.wait_for_server(timeout_sec=args.wait):
            print(
                f"m3 ask: error: no action server {args.action} within {args.wait} s (is the suite running?)",
                file=sys.stderr,
            )
            return 2
        # Feedback is a topic: give discovery a moment so the server's first feedback reaches us.
        settle = time.monotonic() + 1.0
        while node.count_publishers(f"{args.action}/_action/feedback") == 0 and time.monotonic() < settle:
            executor.spin_once(timeout_sec=0.05)
        executor.spin_once(timeout_sec=0.2)

        def on_feedback(message) -> None:
            f = message.feedback
            feedback.append(f)
            if not args.json:
                detail = f" {f.query!r} -> {f.hit_count} memories" if f.action == "search" else ""
                print(f"[round {f.round}] {f.action}{detail}", file=sys.stderr)

        goal = Instruct.Goal(
            instruction=args.question, max_rounds=args.max_rounds, before_clip=args.before_clip, robot_id=args.robot
        )
        sent = client.send_goal_async(goal, feedback_callback=on_feedback)
        deadline = time.monotonic() + args.timeout
        executor.spin_until_future_complete(sent, timeout_sec=args.wait)
        if not sent.done():
            print(
                f"m3 ask: error: no answer to the goal within {args.wait} s (--wait): the control node is "
                "overloaded or lost it (raise its action_queue_depth)",
                file=sys.stderr,
            )
            return 2
        handle = sent.result()
        if not handle.accepted:
            print("m3 ask: error: the control node rejected the goal (busy, goal_policy reject)", file=sys.stderr)
            return 1
        result_future = handle.get_result_async()
        executor.spin_until_future_complete(result_future, timeout_sec=max(0.0, deadline - time.monotonic()))
        if not result_future.done():
            handle.cancel_goal_async()
            executor.spin_once(timeout_sec=1.0)
            print(f"m3 ask: error: no result within {args.timeout} s; goal canceled", file=sys.stderr)
            return 1
        out = result_dict(result_future.result().result, feedback)
    except KeyboardInterrupt:
        return 130
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    if args.json:
        print(json.dumps(out))
    else:
        print_text(out)
    return 0 if out["error_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
