"""`m3 bench replay`: the demo episode end to end, record -> memory ready, and answer accuracy.

The episode is generated first (untimed: it stands in for the camera); then recording it into a
rosbag2 and replaying it through perception and memory are timed together, and the demo questions
are asked through the Instruct action with the embedded default. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m3 bench replay", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="working directory (default: a temporary one)")
    parser.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    args = parser.parse_args(argv)

    from m3_agent.bringup import default_params_file
    from m3_agent.demo.generate import generate
    from m3_agent.evaluation import annotations, report
    from m3_agent.evaluation.runner import evaluate
    from m3_agent.recording.video2bag import convert
    from m3_agent.replay import replay
    from m3_control.judge import make_judge

    params_file = args.params_file or default_params_file()
    with tempfile.TemporaryDirectory(prefix="m3_bench_replay_") as scratch:
        out = Path(args.out or scratch)
        out.mkdir(parents=True, exist_ok=True)
        print("generating the demo episode ...", file=sys.stderr)
        episode = generate(out, cache_dir=out / ".voice_cache")
        started = time.perf_counter()
        convert(episode["video"], out / "bag")
        recorded = time.perf_counter()
        memory_dir = out / "episodes" / "demo_home_01" / "memory"
        replayed = replay(out / "bag", memory_dir, params_file)
        ready = time.perf_counter()
        judge, method = make_judge("", "", 0.0, "")
        records = evaluate(
            annotations.load(episode["questions"]), out / "episodes", out / "answers.jsonl", judge, method, params_file
        )
        asked = time.perf_counter()
        summary = report.summarize(records)
    figures = {
        "episode_s": replayed["stream_s"],
        "realtime_factor": round(replayed["stream_s"] / (ready - started), 3),
        "record_s": round(recorded - started, 3),
        "replay_s": round(ready - recorded, 3),
        "questions": summary["questions"],
        "accuracy": round(summary["accuracy"], 4),
        "accuracy_by_type": {t: round(v["accuracy"], 4) for t, v in summary["by_type"].items()},
        "answer_s_mean": round((asked - ready) / max(1, summary["questions"]), 3),
        "judge": method,
        "clips": replayed["clips_stored"],
        "utterances": replayed["utterances"],
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
