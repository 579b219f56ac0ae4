"""`m3 bench control`: the control loop's cost per round over a memory of 100k nodes, and an Instruct
goal's round trip over DDS, both with a scripted model.

The memory is a real m3_memory Memory (`--memory-nodes N`, default 100,000 episodic memories) built
with m3_agent.bench.memory's synthetic_texts / node_vectors / ingest (bulk) into `--memory-dir` (default: a
temporary directory); the sentence embeddings are cached in `--embedding-cache` (default
~/.cache/m3-agent/bench), and a directory that already holds at least N memories is reused as is.
The loop reaches it through DirectMemoryClient, as the one-process bring-up (`m3 run`) does, or with
`--memory-transport service` through the memory node's services over DDS (control_service.py), the
node in its own process (`--memory-process separate`, default) or in this one (`shared`).

The scripted model searches a new query every round (a memory sentence of the store, reworded as a
question; every 4th asks for a character id, so search_node runs too) and answers in the last round
naming an entity (its ids are resolved: names come with the search results; memory's get_names is
asked at a goal's first search for the named people, then only for ids no result named). Its own
time is measured and subtracted; it is microseconds.

Figures (the LAST stdout line is one JSON object):
- round_overhead_ms, round_overhead_p90_ms, round_overhead_p99_ms: per round, the loop's wall time
  (from one round's end to the next's, the memory searches included) minus the scripted model's
  time; fresh queries, so each search embeds its query (and the query's alias variants) with MiniLM;
- round_overhead_warm_ms: the same goals again: query embeddings come from the embedder's LRU cache;
- loop_only_ms: the loop's own bookkeeping per round (LoopResult.timings_ms: model and memory excluded);
- search_clip_p50_ms / _p99_ms, search_node_p50_ms / _p99_ms, entity_names_p50_ms (get_names; how
  many a round: name_lookups_per_round), entity_name_p50_ms (get_entity; the loop no longer calls it: null):
  the direct client's calls (fresh queries), search_clip_warm_p50_ms (cached embeddings); memories_per_search;
- action_roundtrip_ms: median time from sending an Instruct goal over DDS (client node -> action
  server on the control node, both in this process on one MultiThreadedExecutor) to its result, for
  goals of `--rounds` rounds over the same memory; action_roundtrip_1round_ms: goals answered in
  their first round (the action's own cost plus one answer round);
- memory_nodes, memory_built, build_s, embedding, embed_nodes_per_s, open_s, load (1-minute load average),
  text_runtime and text_threads (the query embedder: `--text-runtime`, `--text-threads`, as the
  memory node's text_runtime / text_threads parameters).

Query embedding dominates a fresh round: MiniLM costs about 7 ms per alias variant on onnxruntime
with 2 threads here (twice that on torch), and a query has 1-4 variants.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

from m3_agent.bench.control_script import ScriptedReasoner, TimedMemory, scripted_queries
from m3_agent.bench.control_service import MEMORY_PROCESSES
from m3_agent.bench.memory import DEFAULT_EMBEDDING_CACHE
from m3_control.direct_memory_client import DirectMemoryClient
from m3_control.loop import SUCCEEDED, LoopConfig, RoundEvent, run_loop
from m3_control.skills import load_skills

PEOPLE = 40  # entities the synthetic memory sentences talk about (m3_agent.bench.memory's default)


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(np.asarray(values), q)), 3) if values else None


def open_memory(args: argparse.Namespace):
    """(Memory, facts about it): the memory in --memory-dir (reused when it holds >= N memories), else
    built there (or in a temporary directory) with m3_agent.bench.memory's generator and bulk ingest."""
    from m3_agent.bench.memory import ingest, node_vectors, synthetic_texts
    from m3_memory.memory import Memory as M3Memory
    from m3_memory.search.embedder import TextEmbedder

    memory_dir = args.memory_dir or args.tmp.name
    embedder = TextEmbedder(runtime=args.text_runtime, threads=args.text_threads)
    start = time.perf_counter()
    memory = M3Memory.open(memory_dir, embedder)
    facts: dict = {"open_s": round(time.perf_counter() - start, 2), "memory_built": False}
    held = len(memory.graph.text)
    if held >= args.memory_nodes:
        print(f"reusing the memory in {memory_dir}: {held} memories", file=sys.stderr, flush=True)
        return memory, facts
    if held:
        memory.close()
        raise ValueError(
            f"{memory_dir} holds {held} memories, fewer than --memory-nodes {args.memory_nodes}: "
            f"use --memory-nodes {held} to measure it as it is, or another --memory-dir"
        )
    sentence_set = args.sentence_set if args.sentence_set is not None else max(10000, -(-args.memory_nodes // 10))
    print(f"building a memory of {args.memory_nodes} nodes in {memory_dir}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    texts = synthetic_texts(args.memory_nodes, PEOPLE, sentence_set)
    cache = os.path.expanduser(args.embedding_cache) if args.embedding_cache else None
    vectors, embed_rate = node_vectors(memory.embedder, texts, sentence_set, cache)
    ingest(memory, texts, args.per_clip, PEOPLE, vectors, "bulk")
    del vectors
    embedded = min(sentence_set, len(texts)) if sentence_set > 0 else len(texts)
    facts.update(
        memory_built=True,
        build_s=round(time.perf_counter() - start, 1),
        embedding="minilm" if embedded == len(texts) else f"sentence_set:{embedded}",
        embed_nodes_per_s=None if embed_rate is None else round(embed_rate, 1),
    )
    return memory, facts


def loop_figures(script: tuple[list[str], str], goals: int, rounds: int, client) -> dict:
    """Per-round loop figures over a memory client, the scripted queries and answer (scripted_queries)
    fresh, then the same queries again (warm)."""
    skills = load_skills()
    queries, answer = script
    out: dict = {}
    for phase in ("cold", "warm"):
        reasoner = ScriptedReasoner(queries, answer)
        timed = TimedMemory(client)
        overhead, loop_only = [], []
        for goal in range(goals):
            reasoner.ms_by_round.clear()
            marks = [time.perf_counter()]

            def on_round(event: RoundEvent, marks=marks) -> None:
                marks.append(time.perf_counter())

            result = run_loop(
                f"Where is the thing of goal {goal}?",
                reasoner,
                timed,
                skills,
                LoopConfig(max_rounds=rounds),
                on_round=on_round,
            )
            if result.code != SUCCEEDED:
                raise RuntimeError(f"scripted goal ended {result.code}: {result.error_message}")
            for index in range(1, len(marks)):
                wall = (marks[index] - marks[index - 1]) * 1000
                overhead.append(wall - reasoner.ms_by_round.get(index, 0.0))
            loop_only.extend(result.timings_ms)
        if phase == "cold":
            out.update(
                round_overhead_ms=round(statistics.median(overhead), 3),
                round_overhead_p90_ms=percentile(overhead, 90),
                round_overhead_p99_ms=percentile(overhead, 99),
                loop_only_ms=round(statistics.median(loop_only), 4),
                search_clip_p50_ms=percentile(timed.ms["search_clip"], 50),
                search_clip_p99_ms=percentile(timed.ms["search_clip"], 99),
                search_node_p50_ms=percentile(timed.ms["search_node"], 50),
                search_node_p99_ms=percentile(timed.ms["search_node"], 99),
                entity_name_p50_ms=percentile(timed.ms["entity_name"], 50),
                entity_names_p50_ms=percentile(timed.ms["entity_names"], 50),
                name_lookups_per_round=round(len(timed.ms["entity_names"]) / len(overhead), 2) if overhead else 0.0,
                memories_per_search=round(statistics.mean(timed.hits), 1) if timed.hits else 0.0,
                rounds_measured=len(overhead),
            )
        else:
            out.update(
                round_overhead_warm_ms=round(statistics.median(overhead), 3),
                search_clip_warm_p50_ms=percentile(timed.ms["search_clip"], 50),
            )
    return out


def action_figures(memory, goals: int, rounds: int) -> dict:
    """Median goal -> result time over DDS: a client node and the control node (scripted model, direct
    memory client over `memory`) in one process, on one MultiThreadedExecutor."""
    import rclpy
    from rclpy.action import ActionClient
    from rclpy.context import Context
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    from m3_control.control_node import ControlNode
    from m3_interfaces.action import Instruct
    from m3_runtime.managed_node import bring_up

    queries, answer = scripted_queries(memory, goals * max(1, rounds - 1), seed=11)
    context = Context()
    rclpy.init(args=[], context=context)
    control = bring_up(
        ControlNode(
            memory_client=DirectMemoryClient(memory), reasoner=ScriptedReasoner(queries, answer), context=context
        )
    )
    client_node = Node("bench_client", context=context)
    client = ActionClient(client_node, Instruct, "/m3/instruct")
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    for node in (control, client_node):
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    def roundtrip(max_rounds: int, index: int) -> float:
        done = threading.Event()
        outcome: dict = {}

        def on_result(future) -> None:
            outcome["result"] = future.result().result
            done.set()

        def on_goal(future) -> None:
            handle = future.result()
            if not handle.accepted:
                done.set()
                return
            handle.get_result_async().add_done_callback(on_result)

        start = time.perf_counter()
        goal = Instruct.Goal(instruction=f"Where is the thing of goal {index}?", max_rounds=max_rounds)
        client.send_goal_async(goal).add_done_callback(on_goal)
        if not done.wait(60.0):
            raise RuntimeError("no Instruct result within 60 s")
        elapsed = (time.perf_counter() - start) * 1000
        result = outcome.get("result")
        if result is None or result.error_code != Instruct.Result.SUCCEEDED:
            raise RuntimeError(f"benchmark goal failed: {result}")
        return elapsed

    try:
        if not client.wait_for_server(timeout_sec=20.0):
            raise RuntimeError("the in-process control node did not serve /m3/instruct")
        roundtrip(1, -1)  # first goal: discovery of the result service and warm-up
        full = [roundtrip(rounds, i) for i in range(goals)]
        single = [roundtrip(1, goals + i) for i in range(goals)]
    finally:
        # Stop the spinning thread before destroying what it waits on (else a rare abort at exit).
        executor.shutdown(timeout_sec=10.0)
        spinner.join(timeout=10.0)
        for node in (control, client_node):
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return {
        "action_roundtrip_ms": round(statistics.median(full), 3),
        "action_roundtrip_p90_ms": percentile(full, 90),
        "action_roundtrip_1round_ms": round(statistics.median(single), 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="m3 bench control", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memory-nodes", type=int, default=100000, help="memories in the memory (default 100000)")
    parser.add_argument("--memory-dir", help="memory directory to build in or reuse (default: a temporary one)")
    parser.add_argument(
        "--embedding-cache",
        default=DEFAULT_EMBEDDING_CACHE,
        help=f"sentence embedding cache directory (default {DEFAULT_EMBEDDING_CACHE})",
    )
    parser.add_argument(
        "--sentence-set",
        type=int,
        help="texts embedded with MiniLM when building, the others jittered copies (m3 bench memory); "
        "0 = all (default max(10000, N/10))",
    )
    parser.add_argument("--per-clip", type=int, default=50, help="memories per clip when building (default 50)")
    parser.add_argument("--goals", type=int, default=20, help="goals per figure (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per goal, the last one answers (default 5)")
    parser.add_argument(
        "--text-runtime",
        choices=("onnxruntime", "torch"),
        default="onnxruntime",
        help="query embedder runtime, as the memory node's text_runtime (default onnxruntime)",
    )
    parser.add_argument(
        "--text-threads", type=int, default=0, help="intra-op threads of the query embedder; 0 = the runtime's default"
    )
    parser.add_argument("--no-ros", action="store_true", help="measure only the loop (no action round trip)")
    parser.add_argument(
        "--memory-transport",
        choices=("direct", "service"),
        default="direct",
        help="how the loop reaches memory: direct (one process, m3 run's default) or service (the memory node's "
        "services over DDS; loop figures only)",
    )
    parser.add_argument(
        "--memory-process",
        choices=MEMORY_PROCESSES,
        default="separate",
        help="with --memory-transport service, where the memory node runs: separate (its own process, "
        "`m3 run --nodes memory_node`, as a control node elsewhere reaches it; default) or shared (this "
        "process, as `m3 run --memory-transport service` runs all nodes in one)",
    )
    args = parser.parse_args(argv)
    if args.memory_nodes < 1 or args.goals < 1 or args.per_clip < 1 or not 2 <= args.rounds <= 20:
        parser.error("--memory-nodes, --goals and --per-clip must be >= 1, --rounds 2..20")
    if args.sentence_set is not None and args.sentence_set < 0:
        parser.error("--sentence-set must be >= 0")
    if args.text_threads < 0:
        parser.error("--text-threads must be >= 0")
    args.tmp = None if args.memory_dir else tempfile.TemporaryDirectory(prefix="m3_bench_control_")
    try:
        memory, facts = open_memory(args)
    except ValueError as error:
        print(f"m3 bench control: error: {error}", file=sys.stderr)
        return 2
    try:
        figures: dict = {"memory_nodes": len(memory.graph.text), **facts, "goals": args.goals, "rounds": args.rounds}
        script = scripted_queries(memory, args.goals * max(1, args.rounds - 1))
        if args.memory_transport == "service":
            from m3_agent.bench.control_service import service_client

            memory_dir = args.memory_dir or args.tmp.name
            memory.close()  # the memory node opens the directory itself
            text_settings = {"text_runtime": args.text_runtime, "text_threads": args.text_threads}
            with service_client(memory_dir, memory.embedder, text_settings, args.memory_process) as client:
                figures.update(loop_figures(script, args.goals, args.rounds, client))
            memory = None
            args.no_ros = True  # the action figures run over the direct client only
        else:
            figures.update(loop_figures(script, args.goals, args.rounds, DirectMemoryClient(memory)))
        print(
            f"round overhead {figures['round_overhead_ms']} ms (median; warm {figures['round_overhead_warm_ms']} ms), "
            f"search_clip p50 {figures['search_clip_p50_ms']} ms",
            file=sys.stderr,
            flush=True,
        )
        if not args.no_ros:
            figures.update(action_figures(memory, args.goals, args.rounds))
            print(f"action round trip {figures['action_roundtrip_ms']} ms (median)", file=sys.stderr, flush=True)
    finally:
        if memory is not None:
            memory.close()  # saves the text index: a reused --memory-dir opens without rebuilding it
        if args.tmp is not None:
            args.tmp.cleanup()
    figures.update(
        memory_transport=args.memory_transport,
        memory_process=args.memory_process if args.memory_transport == "service" else None,
        text_runtime=args.text_runtime,
        text_threads=args.text_threads,
        memory_dir=os.path.abspath(args.memory_dir) if args.memory_dir else None,
        load=round(os.getloadavg()[0], 2),
    )
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
