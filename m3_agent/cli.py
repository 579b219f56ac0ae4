"""The `m3` command line: one entry point for running, querying and measuring the suite.

This module builds the argument parser and dispatches; what each sub-command does is in m3_agent.commands."""

from __future__ import annotations

import argparse
import sys

from m3_agent import bringup, commands
from m3_agent.llm.cli import add_llm_arguments
from m3_memory.errors import StoreError

# Subcommands implemented by a package's own main(argv); every argument, --help included, is theirs.
DELEGATED = {
    "ask": ("m3_control.ask", "ask the running control node a question (the Instruct action)"),
    "judge": ("m3_control.judge", "judge answers against ground truth (model endpoint or labelled match)"),
    "llm": ("m3_agent.llm.cli", "the language model: packaged GGUF state, fetch, serve (llama.cpp)"),
}


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """--set NODE.PARAM=VALUE, checked with the parameter file by commands.checked_parameters."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NODE.PARAM=VALUE",
        help="override one parameter, e.g. --set memory_node.memory_dir=/data/m3 (repeatable)",
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
        add_set_argument(p)
        p.add_argument(
            "--ros-args",
            nargs=argparse.REMAINDER,
            default=[],
            help="further ROS arguments (last), e.g. --ros-args --log-level debug",
        )
        add_llm_arguments(p)

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
    run.add_argument(
        "--memory-transport",
        choices=bringup.MEMORY_TRANSPORTS,
        help="how the control node searches memory: 'direct' calls the memory node's Memory in this process, "
        "'service' calls its ROS services (default: direct when memory_node and control_node both run here, "
        "else service)",
    )
    add_common(run)
    run.set_defaults(func=commands.cmd_run)

    node = sub.add_parser("node", help="run one node alone (same as its console command)")
    node.add_argument("name", choices=("perception", "memory", "control"))
    add_common(node)
    node.set_defaults(func=commands.cmd_node)

    v2b = sub.add_parser("video2bag", help="convert a video (mp4) into a rosbag2 recording")
    v2b.add_argument("video", help="input video with an audio track, e.g. an M3-Bench-robot mp4")
    v2b.add_argument("out", help="output rosbag2 directory (must not exist)")
    v2b.add_argument("--fps", type=float, default=5.0, help="camera frames per second to keep (default 5)")
    v2b.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="rosbag2 storage (default mcap)")
    v2b.add_argument("--image-topic", default="/camera/image_raw/compressed", help="CompressedImage topic")
    v2b.add_argument("--audio-topic", default="/audio", help="AudioChunk topic (16 kHz mono S16LE)")
    v2b.add_argument("--jpeg-quality", type=int, default=85, help="JPEG quality 1..100 (default 85)")
    v2b.add_argument("--max-height", type=int, default=720, help="downscale taller frames; 0 keeps them (default 720)")
    v2b.add_argument("--start-time", type=float, default=0.0, help="header stamp of the video's start [s] (default 0)")
    v2b.add_argument(
        "--poses", default="", metavar="FILE", help="the robot's pose track, CSV or JSON (t [s], x, y [m], yaw [rad])"
    )
    v2b.add_argument("--pose-topic", default="/amcl_pose", help="topic of the pose track (PoseWithCovarianceStamped)")
    v2b.add_argument("--quiet", action="store_true", help="no progress bar")
    v2b.set_defaults(func=commands.cmd_video2bag)

    play = sub.add_parser("play", help="publish a rosbag2 recording with /clock")
    play.add_argument("bag", help="rosbag2 directory (MCAP or sqlite3)")
    play.add_argument("--rate", type=float, default=1.0, help="speed multiplier; 0 = as fast as possible (default 1)")
    play.add_argument("--start-offset", type=float, default=0.0, help="skip the first seconds of the recording")
    play.add_argument("--topics", nargs="+", help="play only these topics")
    play.add_argument("--remap", nargs="+", default=[], metavar="FROM:=TO", help="rename topics, e.g. /audio:=/mic")
    play.add_argument("--no-clock", action="store_true", help="do not publish /clock")
    play.add_argument(
        "--wait-for-subscribers",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="wait up to this long for every topic to have a subscriber before playing (default 5)",
    )
    play.add_argument(
        "--keep-up",
        action="store_true",
        help="pace on a consumer's progress (--keep-up-topic) so nothing is dropped; "
        "with --rate 0: as fast as the nodes keep up",
    )
    play.add_argument(  # a topic of its own, not --keep-up's optional value: `--keep-up BAG` would take the bag
        "--keep-up-topic",
        default="/m3/perception/processed_until",
        metavar="TOPIC",
        help="the consumer's progress topic, rosgraph_msgs/Clock (default: perception's)",
    )
    play.add_argument("--keep-up-lead", type=float, default=0.25, metavar="S", help="max lead in stream time [s]")
    play.set_defaults(func=commands.cmd_play)

    demo = sub.add_parser(
        "demo",
        help="the whole demo: generate an episode, record, replay into memory, ask its questions, write HTML",
    )
    demo.add_argument("--out", default="m3_demo", help="working directory (default ./m3_demo; reused if present)")
    demo.add_argument("--fresh", action="store_true", help="delete the working directory first")
    demo.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    add_set_argument(demo)
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_arguments(demo)
    demo.set_defaults(func=commands.cmd_demo)

    rep = sub.add_parser(
        "replay",
        help="run perception + memory over a recording into a memory directory (lossless; resumes if interrupted)",
    )
    rep.add_argument("bag", help="rosbag2 directory (e.g. from m3 video2bag)")
    rep.add_argument("--memory", required=True, metavar="DIR", help="memory directory (created if missing)")
    rep.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    add_set_argument(rep)
    rep.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_arguments(rep)
    rep.set_defaults(func=commands.cmd_replay)

    ev = sub.add_parser(
        "eval",
        help="answer M3-Bench-format questions with the control action, judge them, write JSONL + a summary",
    )
    ev.add_argument("--annotations", required=True, help="robot.json / web.json style file")
    ev.add_argument("--episodes", required=True, metavar="DIR", help="DIR/<episode_id>/memory from m3 replay")
    ev.add_argument("--episode", nargs="+", help="only these episode ids")
    ev.add_argument("--out", default="m3_eval.jsonl", help="results, one JSON line per question (resumes)")
    ev.add_argument("--max-rounds", type=int, default=5, help="retrieval rounds per question, 1..20 (default 5)")
    ev.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    add_set_argument(ev)
    ev.add_argument("--judge-endpoint", default="", help="OpenAI-compatible judge (default: labelled normalised match)")
    ev.add_argument("--judge-model", default="gpt-4o", help="judge model name (with --judge-endpoint)")
    ev.add_argument("--judge-timeout", type=float, default=60.0, help="judge request timeout [s]")
    ev.add_argument("--judge-api-key-env", default="OPENAI_API_KEY", help="variable holding the judge's API key")
    ev.add_argument("--quiet", action="store_true", help="no per-question lines on stderr")
    add_llm_arguments(ev)
    ev.set_defaults(func=commands.cmd_eval)

    episode = sub.add_parser(
        "make-episode",
        help="render the demo episode offline: episode.mp4, truth.json and questions.json (M3-Bench format)",
    )
    episode.add_argument("out_dir", help="output directory")
    episode.add_argument(
        "--script", help="episode script YAML (default: the built-in demo, m3_agent/demo/episode.yaml)"
    )
    episode.set_defaults(func=commands.cmd_make_episode)

    for name, (_module, text) in DELEGATED.items():
        sub.add_parser(name, help=text, add_help=False)  # listed in --help; main() hands it over

    from m3_memory.store.tools import COMMANDS as MEMORY_TOOLS

    for name, choices, func, text, example in (
        (
            "memory",
            MEMORY_TOOLS,
            commands.cmd_memory,
            "check, repair, count, export and import a memory directory",
            "check",
        ),
        (
            "bench",
            commands.BENCHMARKS,
            commands.cmd_bench,
            "benchmarks; each prints one JSON object as its last stdout line",
            "memory",
        ),
    ):  # each hands the arguments after its first one to a module's main(argv)
        usage = f"{text}. Arguments after the first go to it: m3 {name} {example} --help"
        handover = sub.add_parser(name, help=text, description=usage)
        handover.add_argument("target", choices=sorted(choices), help="what to do")
        handover.add_argument("args", nargs=argparse.REMAINDER, help="its own arguments")
        handover.set_defaults(func=func)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in DELEGATED:
        import importlib

        return importlib.import_module(DELEGATED[argv[0]][0]).main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, FileExistsError, ValueError, RuntimeError, StoreError) as error:
        print(f"m3 {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
