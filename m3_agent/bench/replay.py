"""`m3 bench replay`: the demo episode end to end, record -> memory ready, and answer accuracy.

The episode is generated first (untimed: it stands in for the camera); then recording it into a
rosbag2 and replaying it through perception and memory (memorization beside perception) are timed
together, and the demo questions are asked through the Instruct action. `--llm` picks the LLM
profile's mode as for `m3 demo` (none: rules memorizer + extractive reasoner; embedded: both on the
local llama.cpp server, started before the clock starts). The last stdout line is JSON with
`accuracy`, `realtime_factor` (episode seconds / seconds from recording to memory ready),
`memorize_s_per_clip`, `answer_s_p50` and `answer_s_p90`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from m3_agent.llm.cli import add_llm_arguments, service_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m3 bench replay", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="working directory (default: a temporary one)")
    parser.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    parser.add_argument("--episode", help="episode script YAML (default: the demo's, m3_agent/demo/episode.yaml)")
    add_llm_arguments(parser)
    args = parser.parse_args(argv)
    with service_for(args) as llm:
        figures = run(args, llm)
    print(json.dumps(figures))
    return 0


def _percentile(values: list[float], q: float) -> float:
    import numpy as np

    return round(float(np.percentile(values, q)), 3) if values else 0.0


def render_episode(out: Path, script: str | Path | None, voice_cache: Path, reuse: bool = False) -> dict:
    """episode.mp4, truth.json and questions.json in out (paths returned, with "fresh"). reuse: keep
    the files while the script and the generator are unchanged (their hash is kept beside them)."""
    from m3_agent.demo import generate as generator
    from m3_agent.demo import places, timeline

    path = Path(script or generator.default_script())
    digest = hashlib.sha256(path.read_bytes())
    for module in (generator, timeline, places):  # a change to the generator renders anew
        digest.update(Path(module.__file__).read_bytes())
    stamp = out / "script.sha256"
    paths = {
        "video": str(out / "episode.mp4"),
        "truth": str(out / "truth.json"),
        "questions": str(out / "questions.json"),
    }
    if (
        reuse
        and stamp.exists()
        and stamp.read_text() == digest.hexdigest()
        and all(map(os.path.exists, paths.values()))
    ):
        return {**paths, "fresh": False}
    stamp.unlink(missing_ok=True)
    paths = generator.generate(out, path, cache_dir=voice_cache)
    stamp.write_text(digest.hexdigest())
    return {**paths, "fresh": True}


def record_and_replay(out: Path, episode: dict, params_file: str, overrides: dict) -> dict:
    """Record the episode's video into out/bag and replay it into out/episodes/<id>/memory; the
    replay report plus record_s, replay_s (the timed part) and memory_dir."""
    from m3_agent.demo.places import place_setup, with_parameters
    from m3_agent.demo.things import seeing_parameters
    from m3_agent.evaluation import annotations
    from m3_agent.recording.video2bag import ConversionOptions, convert
    from m3_agent.replay import replay

    poses, place_parameters = place_setup(out)  # an episode with places: its pose track and regions file
    started = time.perf_counter()
    convert(episode["video"], out / "bag", ConversionOptions(poses=poses))
    recorded = time.perf_counter()
    questions = annotations.load(episode["questions"])
    memory_dir = out / "episodes" / questions[0].episode_id / "memory"
    overrides = with_parameters(with_parameters(overrides, place_parameters), seeing_parameters(out))  # things: eyes on
    replayed = replay(out / "bag", memory_dir, params_file, overrides=overrides)
    ready = time.perf_counter()
    return {**replayed, "record_s": recorded - started, "replay_s": ready - recorded, "memory_dir": str(memory_dir)}


def ask_questions(
    out: Path, questions_file: str, params_file: str, overrides: dict, truth_file: str
) -> tuple[list[dict], str]:
    """Every question of the episode asked anew through the Instruct action; (records, judge method).
    truth_file: the episode's truth; an answer may write its people's names in any spelling it lists."""
    from m3_agent.demo.places import place_parameters, with_parameters
    from m3_agent.demo.timeline import episode_judge
    from m3_agent.evaluation import annotations
    from m3_agent.evaluation.runner import evaluate

    overrides = with_parameters(overrides, place_parameters(out))  # the control node plans to the episode's places
    answers = out / "answers.jsonl"
    answers.unlink(missing_ok=True)  # the runner skips questions already answered there
    judge, method = episode_judge(truth_file)
    records = evaluate(
        annotations.load(questions_file), out / "episodes", answers, judge, method, params_file, overrides=overrides
    )
    return records, method


def seeing_figures(script: str | Path | None, records: list[dict]) -> dict:
    """How many of the script's questions only seeing answers (`seen: true`, demo/things.py) were asked
    and answered right."""
    import yaml

    from m3_agent.demo.generate import default_script

    questions = yaml.safe_load(Path(script or default_script()).read_text())["questions"]
    seen = {q["q"] for q in questions if q.get("seen")}
    asked = [r for r in records if r["question"] in seen]
    return {"seeing_questions": len(asked), "seeing_right": sum(1 for r in asked if r["verdict"])}


def run(args: argparse.Namespace, llm) -> dict:
    from m3_agent.bringup import default_params_file
    from m3_agent.evaluation import report

    params_file = args.params_file or default_params_file()
    with tempfile.TemporaryDirectory(prefix="m3_bench_replay_") as scratch:
        out = Path(args.out or scratch)
        out.mkdir(parents=True, exist_ok=True)
        print("generating the demo episode ...", file=sys.stderr)
        episode = render_episode(out, args.episode, out / ".voice_cache")
        for stale in (out / "bag", out / "episodes"):  # an --out used before: record and replay anew
            shutil.rmtree(stale, ignore_errors=True)
        overrides = llm.merged()
        replayed = record_and_replay(out, episode, params_file, overrides)
        ready = time.perf_counter()
        records, method = ask_questions(out, episode["questions"], params_file, overrides, episode["truth"])
        asked = time.perf_counter()
        summary = report.summarize(records)
    seconds = [float(r.get("seconds", 0.0)) for r in records]
    return {
        "llm": llm.mode,
        "episode_s": replayed["stream_s"],
        "realtime_factor": round(replayed["stream_s"] / (replayed["record_s"] + replayed["replay_s"]), 3),
        "record_s": round(replayed["record_s"], 3),
        "replay_s": round(replayed["replay_s"], 3),
        "questions": summary["questions"],
        "accuracy": round(summary["accuracy"], 4),
        "accuracy_by_type": {t: round(v["accuracy"], 4) for t, v in summary["by_type"].items()},
        **seeing_figures(args.episode, records),
        "answer_s_mean": round((asked - ready) / max(1, summary["questions"]), 3),
        "answer_s_p50": _percentile(seconds, 50),
        "answer_s_p90": _percentile(seconds, 90),
        "memorize_s_per_clip": replayed["memorize_s_per_clip"],
        "memory_ready_after_s": replayed["memory_ready_after_s"],
        "clips_degraded": replayed["clips_degraded"],
        "errors": sum(1 for r in records if r.get("error")),
        "judge": method,
        "clips": replayed["clips_stored"],
        "utterances": replayed["utterances"],
    }


if __name__ == "__main__":
    sys.exit(main())
