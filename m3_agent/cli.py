"""The `m3` command line: one entry point for running, querying and measuring the suite."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from m3_agent import bringup
from m3_agent.llm.cli import add_llm_arguments, service_for
from m3_memory.errors import StoreError
from m3_perception.managed_node import stop_on_sigterm
from m3_perception.node_shutdown import StopSignals, stop_name


def _cmd_run(args: argparse.Namespace) -> int:
    stop_on_sigterm()  # SIGTERM as Ctrl-C: nodes shut down (stores closed), a model server stopped, exit 0
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

    overrides = bringup.parse_overrides(args.set)
    bringup.check_parameters(args.params_file, overrides)  # a typo or bad value: exit 2 before anything starts
    try:
        with service_for(args, needed=bool({"memory_node", "control_node"} & set(selected))) as llm:
            bringup.run(
                params_file=args.params_file,
                selected=selected,
                exit_after_s=args.exit_after,
                on_ready=check if args.check else None,
                ros_args=args.ros_args,
                stop=stop,
                overrides=llm.merged(overrides),
                memory_transport=args.memory_transport,
            )
    except KeyboardInterrupt:  # stopped while starting or stopping: what was up is already shut down
        pass
    return 0 if outcome["ok"] else 1


def _cmd_node(args: argparse.Namespace) -> int:
    return _cmd_run(
        argparse.Namespace(
            nodes=[f"{args.name}_node"],
            params_file=args.params_file,
            exit_after=args.exit_after,
            check=False,
            ros_args=args.ros_args,
            set=args.set,
            memory_transport=None,
            llm=args.llm,
            llm_config=args.llm_config,
        )
    )


def _cmd_video2bag(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from m3_agent.recording.video2bag import ConversionOptions, convert, media_duration_s

    options = ConversionOptions(
        fps=args.fps,
        storage=args.storage,
        image_topic=args.image_topic,
        audio_topic=args.audio_topic,
        jpeg_quality=args.jpeg_quality,
        max_height=args.max_height,
        start_time_s=args.start_time,
    )
    options.validate()
    duration_s = media_duration_s(args.video)
    if Path(args.out).exists():
        raise FileExistsError(f"output already exists (rosbag2 writes a new directory): {args.out}")
    with tqdm(total=round(duration_s, 1), unit="s", desc="video2bag", disable=args.quiet) as bar:

        def progress(done_s: float) -> None:
            bar.update(round(done_s, 1) - bar.n)

        report = convert(args.video, args.out, options, progress)
    print(json.dumps({"bag": str(args.out), "storage": args.storage, **vars(report)}))
    return 0


def _cmd_play(args: argparse.Namespace) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from m3_agent.recording.bag_reader import bag_info
    from m3_agent.recording.player import BagPlayer, PlaybackOptions, parse_remaps, spinning

    options = PlaybackOptions(
        rate=args.rate,
        start_offset_s=args.start_offset,
        topics=args.topics,
        remaps=parse_remaps(args.remap),
        publish_clock=not args.no_clock,
        wait_for_subscribers_s=args.wait_for_subscribers,
        keep_up_topic=args.keep_up or "",
        keep_up_lead_s=args.keep_up_lead,
    )
    options.validate()
    with StopSignals(raise_interrupt=False) as stop:  # before rclpy.init, which chains to it; play polls it
        rclpy.init(args=[])  # not sys.argv: rcl would read a --remap FROM:=TO as a (deprecated) remap rule
        node = Node("bag_player")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        player = None

        def interrupted() -> bool:
            return bool(stop.name) or not executor.context.ok()  # rclpy's handler shuts the context down too

        try:
            with spinning(executor):  # progress callbacks for --keep-up; joined before the teardown below
                player = BagPlayer(node, args.bag, options)
                player.play(should_stop=interrupted)
        except RuntimeError:  # rclpy refuses to publish once Ctrl-C has shut the context down
            if not interrupted():
                raise
        except TimeoutError as error:
            print(f"m3 play: error: {error}", file=sys.stderr)
            return 1
        finally:
            stopped = stop.name or ("sigint" if interrupted() else "")
            executor.shutdown()
            node.destroy_node()
            rclpy.try_shutdown()
        if player is not None:
            report = {"bag": str(args.bag), "published": player.published, **player.status.summary()}
            if stopped:  # where: the stream time of the last message read, from the recording's start
                read_until_ns = max(0, player.status.read_until_ns - bag_info(args.bag).start_ns)
                report.update(stopped=stopped, read_until_s=round(read_until_ns / 1e9, 3))
            print(json.dumps(report))
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from m3_agent.replay import ReplayStopped, replay

    params_file = args.params_file or bringup.default_params_file()
    try:
        with StopSignals(), service_for(args) as llm:  # SIGTERM as Ctrl-C: stored, closed, said where
            report = replay(args.bag, args.memory, params_file, show_progress=not args.quiet, overrides=llm.merged())
    except ReplayStopped as stopped:
        report = stopped.report
    except KeyboardInterrupt as interrupt:  # before the replay began (models loading)
        report = {"bag": str(args.bag), "memory_dir": str(args.memory), "stopped": stop_name(interrupt)}
    print(json.dumps(report))
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from m3_agent.evaluation import annotations, report
    from m3_agent.evaluation.runner import evaluate
    from m3_control.judge import make_judge

    if not 1 <= args.max_rounds <= 20:
        raise ValueError("--max-rounds must be within 1..20")
    questions = annotations.load(args.annotations, args.episode)
    judge, method = make_judge(args.judge_endpoint, args.judge_model, args.judge_timeout, args.judge_api_key_env)
    out = Path(args.out)

    def show(record: dict) -> None:
        if not args.quiet:
            mark = "correct" if record["verdict"] else "wrong"
            print(
                f"[{record['question_id']}] {record['question']}\n    -> {record['answer']!r} ({mark}; "
                f"expected {record['ground_truth']!r}; evidence {', '.join(record['evidence']) or 'none'})",
                file=sys.stderr,
            )

    params_file = args.params_file or bringup.default_params_file()
    try:
        with StopSignals(), service_for(args) as llm:  # SIGTERM as Ctrl-C; the results file resumes
            records = evaluate(
                questions, args.episodes, out, judge, method, params_file, args.max_rounds, show, llm.merged()
            )
    except KeyboardInterrupt as interrupt:
        answered = len(report.read_done(out).keys() & {q.question_id for q in questions})
        print(json.dumps({"results": str(out), "judge": method, "stopped": stop_name(interrupt), "answered": answered}))
        return 0
    summary = report.summarize(records)
    print(report.format_table(summary), file=sys.stderr)
    print(json.dumps({"results": str(out), "judge": method, **summary}))
    return 0


# Subcommands implemented by a package's own main(argv); every argument, --help included, is theirs.
DELEGATED = {
    "ask": ("m3_control.ask", "ask the running control node a question (the Instruct action)"),
    "judge": ("m3_control.judge", "judge answers against ground truth (model endpoint or labelled match)"),
    "llm": ("m3_agent.llm.cli", "the language model: packaged GGUF state, fetch, serve (llama.cpp)"),
}


def _cmd_demo(args: argparse.Namespace) -> int:
    from m3_agent.demo.pipeline import run_demo
    from m3_agent.replay import ReplayStopped

    params_file = args.params_file or bringup.default_params_file()
    try:
        with StopSignals(), service_for(args) as llm:  # SIGTERM as Ctrl-C; a re-run goes on from where it stopped
            result = run_demo(args.out, params_file, args.fresh, not args.quiet, llm.merged())
    except KeyboardInterrupt as interrupt:
        result = {"out": str(args.out), "stopped": stop_name(interrupt)}
        if isinstance(interrupt, ReplayStopped):
            result["replay"] = interrupt.report
    print(json.dumps(result))
    return 0


def _cmd_make_episode(args: argparse.Namespace) -> int:
    from m3_agent.demo.generate import generate

    print(json.dumps(generate(args.out_dir, args.script)))
    return 0


BENCHMARKS = {
    "perception": "m3_perception.bench",
    "memory": "m3_memory.bench",
    "fleet": "m3_memory.bench_fleet",
    "control": "m3_control.bench",
    "replay": "m3_agent.replay_bench",
    "identity": "m3_agent.identity_bench",
}


def _cmd_memory(args: argparse.Namespace) -> int:
    from m3_memory.store_tools import COMMANDS

    return COMMANDS[args.target](args.args)


def _cmd_bench(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(BENCHMARKS[args.target])
    return module.main(args.args)


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
            "--set",
            action="append",
            default=[],
            metavar="NODE.PARAM=VALUE",
            help="override one parameter, e.g. --set memory_node.memory_dir=/data/m3 (repeatable)",
        )
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
    run.set_defaults(func=_cmd_run)

    node = sub.add_parser("node", help="run one node alone (same as its console command)")
    node.add_argument("name", choices=("perception", "memory", "control"))
    add_common(node)
    node.set_defaults(func=_cmd_node)

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
    v2b.add_argument("--quiet", action="store_true", help="no progress bar")
    v2b.set_defaults(func=_cmd_video2bag)

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
        nargs="?",
        const="/m3/perception/processed_until",
        metavar="TOPIC",
        help="pace on a consumer's progress (default topic: perception's) so nothing is dropped; "
        "with --rate 0: as fast as the nodes keep up",
    )
    play.add_argument("--keep-up-lead", type=float, default=0.25, metavar="S", help="max lead in stream time [s]")
    play.set_defaults(func=_cmd_play)

    demo = sub.add_parser(
        "demo",
        help="the whole demo: generate an episode, record, replay into memory, ask its questions, write HTML",
    )
    demo.add_argument("--out", default="m3_demo", help="working directory (default ./m3_demo; reused if present)")
    demo.add_argument("--fresh", action="store_true", help="delete the working directory first")
    demo.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_arguments(demo)
    demo.set_defaults(func=_cmd_demo)

    rep = sub.add_parser(
        "replay",
        help="run perception + memory over a recording into a memory directory (lossless; resumes if interrupted)",
    )
    rep.add_argument("bag", help="rosbag2 directory (e.g. from m3 video2bag)")
    rep.add_argument("--memory", required=True, metavar="DIR", help="memory directory (created if missing)")
    rep.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    rep.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_arguments(rep)
    rep.set_defaults(func=_cmd_replay)

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
    ev.add_argument("--judge-endpoint", default="", help="OpenAI-compatible judge (default: labelled normalised match)")
    ev.add_argument("--judge-model", default="gpt-4o", help="judge model name (with --judge-endpoint)")
    ev.add_argument("--judge-timeout", type=float, default=60.0, help="judge request timeout [s]")
    ev.add_argument("--judge-api-key-env", default="OPENAI_API_KEY", help="variable holding the judge's API key")
    ev.add_argument("--quiet", action="store_true", help="no per-question lines on stderr")
    add_llm_arguments(ev)
    ev.set_defaults(func=_cmd_eval)

    episode = sub.add_parser(
        "make-episode",
        help="render the demo episode offline: episode.mp4, truth.json and questions.json (M3-Bench format)",
    )
    episode.add_argument("out_dir", help="output directory")
    episode.add_argument(
        "--script", help="episode script YAML (default: the built-in demo, m3_agent/demo/episode.yaml)"
    )
    episode.set_defaults(func=_cmd_make_episode)

    for name, (_module, text) in DELEGATED.items():
        sub.add_parser(name, help=text, add_help=False)  # listed in --help; main() hands it over

    from m3_memory.store_tools import COMMANDS as MEMORY_TOOLS

    for name, choices, func, text, example in (
        ("memory", MEMORY_TOOLS, _cmd_memory, "check, repair, count, export and import a memory directory", "check"),
        ("bench", BENCHMARKS, _cmd_bench, "benchmarks; each prints one JSON object as its last stdout line", "memory"),
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
