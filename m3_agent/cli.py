"""The `m3` command line: one entry point for running, querying and measuring the suite."""

from __future__ import annotations

import argparse
import json
import sys
import threading

from m3_agent import bringup


def _cmd_run(args: argparse.Namespace) -> int:
    selected = tuple(args.nodes or bringup.NODE_NAMES)
    stop = threading.Event()
    outcome = {"ok": True}

    def check(nodes) -> None:
        def probe() -> None:
            snapshot = bringup.snapshot_graph(nodes[0], selected)
            print(json.dumps(snapshot.as_dict(), indent=2), flush=True)
            missing = sorted(set(selected) - set(snapshot.nodes))
            if missing:
                print(f"m3 run --check: node(s) not up: {', '.join(missing)}", file=sys.stderr)
                outcome["ok"] = False
            else:
                print(f"m3 run --check: {len(selected)} node(s) up", file=sys.stderr)
            stop.set()

        threading.Thread(target=probe, daemon=True).start()

    bringup.run(
        params_file=args.params_file,
        selected=selected,
        exit_after_s=args.exit_after,
        on_ready=check if args.check else None,
        ros_args=args.ros_args,
        stop=stop,
    )
    return 0 if outcome["ok"] else 1


def _cmd_node(args: argparse.Namespace) -> int:
    return _cmd_run(
        argparse.Namespace(
            nodes=[f"{args.name}_node"],
            params_file=args.params_file,
            exit_after=args.exit_after,
            check=False,
            ros_args=args.ros_args,
        )
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="m3",
        description="m3-agent-ros: long-term multimodal memory for ROS 2 robots.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add_common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
        p.add_argument("--exit-after", type=float, metavar="SECONDS", help="stop after this many seconds")
        p.add_argument(
            "--ros-args",
            nargs=argparse.REMAINDER,
            default=[],
            help="further ROS arguments, e.g. --ros-args -p memory_node.memory_dir:=/tmp/mem",
        )

    run = sub.add_parser("run", help="run perception, memory and control nodes in one process")
    run.add_argument(
        "--nodes",
        nargs="+",
        choices=bringup.NODE_NAMES,
        help="run only these nodes (default: all three)",
    )
    run.add_argument(
        "--check",
        action="store_true",
        help="start the nodes, print the ROS graph they expose as JSON, and exit (non-zero if one is missing)",
    )
    add_common(run)
    run.set_defaults(func=_cmd_run)

    node = sub.add_parser("node", help="run one node alone (same as its console command)")
    node.add_argument("name", choices=("perception", "memory", "control"))
    add_common(node)
    node.set_defaults(func=_cmd_node)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as error:
        print(f"m3 {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
