"""The README's main job: generate the demo episode, record it, replay it into memory, ask the
questions through the control action, and write an HTML view of the memory with the answers."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

EPISODE_FILES = ("episode.mp4", "truth.json", "questions.json")
PLACE_FILES = ("regions.yaml", "poses.json")  # the demo script has places (demo/places.py)


def _say(text: str) -> None:
    print(f"\n== {text}", file=sys.stderr, flush=True)


def _memory_for_memorizer(memory_dir: Path, memorizer: dict) -> None:
    """A memory built with another memorizer setting (e.g. rules, now a language model) is rebuilt,
    so the demo's answers always come from the memory the chosen back-ends make."""
    record = memory_dir.parent / "memorizer.json"  # absent: built before it was recorded, by the default
    wanted = json.dumps({k: v for k, v in memorizer.items() if k in ("memorizer", "openai_model")}, sort_keys=True)
    if memory_dir.exists() and (record.read_text() if record.exists() else "{}") != wanted:
        _say(f"the memory in {memory_dir} was built with other memorizer settings: rebuilding it")
        shutil.rmtree(memory_dir)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(wanted)


def run_demo(
    out_dir: str | Path,
    params_file: str,
    fresh: bool = False,
    show_progress: bool = True,
    overrides: dict[str, dict[str, object]] | None = None,
    stop_check: Callable[[], None] = lambda: None,
) -> dict:
    """overrides: node parameters over params_file's (the LLM profile's back-ends, from `m3 demo --llm`).
    stop_check: called before each stage; it raises once Ctrl-C or SIGTERM came (StopSignals.check), so
    a stop is honoured at the next stage even if a library swallowed its KeyboardInterrupt."""
    from m3_agent.demo.generate import generate
    from m3_agent.demo.places import place_setup, with_parameters
    from m3_agent.demo.things import seeing_parameters
    from m3_agent.demo.timeline import episode_judge
    from m3_agent.evaluation import annotations, report
    from m3_agent.evaluation.runner import evaluate
    from m3_agent.recording.video2bag import ConversionOptions, convert
    from m3_agent.replay import replay
    from m3_agent.view import memory_html
    from m3_memory.store.sqlite_store import MemoryStore

    out = Path(out_dir).resolve()
    if fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    episode_id = "demo_home_01"

    stop_check()
    bag = out / "bag"
    if not all((out / name).exists() for name in EPISODE_FILES + PLACE_FILES):  # renders made before places too
        _say("1/5 generating the demo episode (Festival / espeak-ng voices, real photographs, places)")
        generate(out, cache_dir=out / ".voice_cache")
        shutil.rmtree(bag, ignore_errors=True)  # recorded from an older rendering
    else:
        _say("1/5 demo episode already generated")
    poses, place_parameters = place_setup(out)  # the robot's path through the home, and its regions file
    stop_check()
    if not bag.exists():
        _say("2/5 recording it into a rosbag2 (MCAP), with the robot's pose track")
        convert(out / "episode.mp4", bag, ConversionOptions(poses=poses))
    else:
        _say("2/5 recording already made")
    stop_check()
    _say("3/5 replaying the recording through perception and memory")
    memory_dir = out / "episodes" / episode_id / "memory"
    overrides = with_parameters(with_parameters(overrides or {}, place_parameters), seeing_parameters(out))
    _memory_for_memorizer(memory_dir, overrides.get("memory_node", {}))
    replay_report = replay(bag, memory_dir, params_file, show_progress, overrides)
    reasoner = overrides.get("control_node", {}).get("backend", "set in the parameter file")
    stop_check()
    _say(f"4/5 asking the demo questions through the Instruct action (reasoner: {reasoner})")
    results = out / "answers.jsonl"
    results.unlink(missing_ok=True)
    judge, method = episode_judge(out / "truth.json")

    def show(record: dict) -> None:
        mark = "✔" if record["verdict"] else "✘"
        print(
            f"{mark} {record['question']}\n    answer:   {record['answer']}\n    expected: {record['ground_truth']}"
            f"\n    evidence: {', '.join(record['evidence']) or 'none'}"
        )

    records = evaluate(
        annotations.load(out / "questions.json"),
        out / "episodes",
        results,
        judge,
        method,
        params_file,
        on_result=show,
        overrides=overrides,
    )
    summary = report.summarize(records)
    print(f"\naccuracy by question type (judge: {method}):\n{report.format_table(summary)}")
    if summary["answered_by_rules"]:
        print(
            f"{summary['answered_by_rules']} answer(s) by the rules where the model did not know "
            f"({summary['answered_by_rules_right']} right; control_node rules_when_unsure)"
        )
    stop_check()
    _say("5/5 writing the HTML view of the memory")
    store = MemoryStore(str(memory_dir), create=False)
    try:
        export = store.export_json()
    finally:
        store.close()
    answers = [
        {
            "question": r["question"],
            "answer": r["answer"],
            "ground_truth": r["ground_truth"],
            "verdict": r["verdict"],
            "evidence": r["evidence"],
        }
        for r in records
    ]
    html = memory_html.write(export, out / "memory.html", answers, title=f"m3 memory of {episode_id}")
    print(f"\nHTML view of the memory: {html}")
    return {
        "out_dir": str(out),
        "html": str(html),
        "answers": str(results),
        "replay": replay_report,
        "accuracy": summary["accuracy"],
        "by_type": summary["by_type"],
    }
