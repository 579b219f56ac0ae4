"""What each `m3` sub-command does, given its parsed arguments (m3_agent.cli builds the parser and
hands over). Each returns the exit status; main() turns the errors they raise into one line and exit 2."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from m3_agent import bringup
from m3_agent.llm.cli import service_for
from m3_runtime.managed_node import stop_on_sigterm
from m3_runtime.node_shutdown import StopSignals, stop_name


def checked_parameters(args: argparse.Namespace) -> tuple[str, dict[str, dict[str, object]]]:
    """The parameter file (default: the installed config/m3.yaml) and the --set overrides, refused as a node
    refuses them ("<node>: cannot configure: <why>", exit 2; an integer for a float is fine) before a model
    server starts, a store opens or a recording is read: `m3 run`, `node`, `replay`, `eval` and `demo`."""
    params_file = args.params_file or bringup.default_params_file()
    overrides = bringup.parse_overrides(args.set)
    bringup.check_parameters(params_file, overrides)
    return params_file, overrides


def cmd_run(args: argparse.Namespace) -> int:
    stop_on_sigterm()  # SIGTERM as Ctrl-C: nodes shut down (stores closed), a model server stopped, exit 0
    selected = tuple(args.nodes or bringup.NODE_NAMES)
    stop = threading.Event()
    outcome = {"ok": True}

    def check(nodes) -> None:
        def probe() -> None:
            ours = {node.get_name(): {publisher.topic_name for publisher in node.publishers} for node in nodes}
            snapshot = bringup.snapshot_graph(nodes[0], selected, expected_topics=ours)
            print(json.dumps(snapshot.as_dict(), indent=2), flush=True)
            missing = sorted(set(selected) - set(snapshot.nodes))
            if missing:
                print(f"m3 run --check: node(s) not up: {', '.join(missing)}", file=sys.stderr)
                outcome["ok"] = False
            for name, topics in snapshot.undiscovered.items():
                if name in snapshot.duplicate_nodes:  # endpoints are looked up by name: these may be the other's
                    print(f"m3 run --check: {name}: cannot tell its topics from those of another process's node "
                          f"of that name; DDS shows {name} without {', '.join(topics)}", file=sys.stderr)  # fmt: skip
                else:
                    print(f"m3 run --check: {name}: DDS does not show its topics {', '.join(topics)}", file=sys.stderr)
                    outcome["ok"] = False
            if outcome["ok"] and not missing:
                print(f"m3 run --check: {len(selected)} node(s) up", file=sys.stderr)
            stop.set()

        threading.Thread(target=probe, daemon=True).start()

    params_file, overrides = checked_parameters(args)  # a typo or bad value: exit 2 before anything starts
    try:
        with service_for(args, needed=bool({"memory_node", "control_node"} & set(selected))) as llm:
            bringup.run(
                params_file=params_file,
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


def cmd_node(args: argparse.Namespace) -> int:
    return cmd_run(
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


def cmd_video2bag(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from m3_agent.recording.pose_track import load_poses
    from m3_agent.recording.video2bag import ConversionOptions, convert, media_duration_s

    options = ConversionOptions(
        fps=args.fps,
        storage=args.storage,
        image_topic=args.image_topic,
        audio_topic=args.audio_topic,
        jpeg_quality=args.jpeg_quality,
        max_height=args.max_height,
        start_time_s=args.start_time,
        poses=tuple(load_poses(args.poses)) if args.poses else (),
        pose_topic=args.pose_topic,
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


def cmd_play(args: argparse.Namespace) -> int:
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
        keep_up_topic=args.keep_up_topic if args.keep_up else "",
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


def cmd_replay(args: argparse.Namespace) -> int:
    from m3_agent.replay import replay
    from m3_agent.replay_report import ReplayStopped

    params_file, overrides = checked_parameters(args)
    try:
        with StopSignals(), service_for(args) as llm:  # SIGTERM as Ctrl-C: stored, closed, said where
            merged = llm.merged(overrides)
            report = replay(args.bag, args.memory, params_file, show_progress=not args.quiet, overrides=merged)
    except ReplayStopped as stopped:
        report = stopped.report
    except KeyboardInterrupt as interrupt:  # before the replay began (models loading)
        report = {"bag": str(args.bag), "memory_dir": str(args.memory), "stopped": stop_name(interrupt)}
    print(json.dumps(report))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from m3_agent.evaluation import annotations, report
    from m3_agent.evaluation.runner import evaluate
    from m3_control.judge import make_judge

    if not 1 <= args.max_rounds <= 20:
        raise ValueError("--max-rounds must be within 1..20")
    params_file, overrides = checked_parameters(args)
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

    try:
        with StopSignals(), service_for(args) as llm:  # SIGTERM as Ctrl-C; the results file resumes
            records = evaluate(
                questions, args.episodes, out, judge, method, params_file, args.max_rounds, show, llm.merged(overrides)
            )
    except KeyboardInterrupt as interrupt:
        answered = len(report.read_done(out).keys() & {q.question_id for q in questions})
        print(json.dumps({"results": str(out), "judge": method, "stopped": stop_name(interrupt), "answered": answered}))
        return 0
    summary = report.summarize(records)
    print(report.format_table(summary), file=sys.stderr)
    print(json.dumps({"results": str(out), "judge": method, **summary}))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from m3_agent.demo.pipeline import run_demo
    from m3_agent.replay_report import ReplayStopped

    params_file, overrides = checked_parameters(args)
    try:
        with StopSignals() as stop, service_for(args) as llm:  # SIGTERM as Ctrl-C; a re-run goes on from there
            result = run_demo(args.out, params_file, args.fresh, not args.quiet, llm.merged(overrides), stop.check)
    except KeyboardInterrupt as interrupt:
        result = {"out": str(args.out), "stopped": stop_name(interrupt)}
        if isinstance(interrupt, ReplayStopped):
            result["replay"] = interrupt.report
    print(json.dumps(result))
    return 0


def cmd_make_episode(args: argparse.Namespace) -> int:
    from m3_agent.demo.generate import generate

    print(json.dumps(generate(args.out_dir, args.script)))
    return 0


BENCHMARKS = {
    "perception": "m3_agent.bench.perception",
    "memory": "m3_agent.bench.memory",
    "fleet": "m3_agent.bench.fleet",
    "control": "m3_agent.bench.control",
    "replay": "m3_agent.bench.replay",
    "identity": "m3_agent.bench.identity",
}


def cmd_memory(args: argparse.Namespace) -> int:
    from m3_memory.store.tools import COMMANDS

    return COMMANDS[args.target](args.args)


def cmd_bench(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(BENCHMARKS[args.target])
    return module.main(args.args)
