"""Results of an evaluation: JSONL lines (resumable) and accuracy by question type."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from m3_agent.evaluation.annotations import ROBOT_TYPES


def read_done(jsonl: str | Path) -> dict[str, dict]:
    """Results already written, by question id (a re-run skips them); a torn last line is ignored."""
    done = {}
    path = Path(jsonl)
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a run killed mid-write leaves at most one partial line
            done[record["question_id"]] = record
    return done


def append(jsonl: str | Path, record: dict) -> None:
    with open(jsonl, "a", encoding="utf-8") as out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()


def summarize(records: list[dict]) -> dict:
    """Accuracy overall and per type label (a question counts once for each of its labels)."""
    by_type: dict[str, list[bool]] = defaultdict(list)
    for record in records:
        for label in record["type"]:
            by_type[label].append(bool(record["verdict"]))
    order = [t for t in ROBOT_TYPES if t in by_type] + sorted(set(by_type) - set(ROBOT_TYPES))
    return {
        "questions": len(records),
        "accuracy": sum(bool(r["verdict"]) for r in records) / len(records) if records else 0.0,
        "by_type": {t: {"questions": len(by_type[t]), "accuracy": sum(by_type[t]) / len(by_type[t])} for t in order},
        # answers the rules gave where a model did not know (m3_control.second_opinion), and how many were right
        "answered_by_rules": sum(1 for r in records if r.get("answered_by")),
        "answered_by_rules_right": sum(1 for r in records if r.get("answered_by") and r["verdict"]),
    }


def format_table(summary: dict) -> str:
    """The summary as a text table, like the paper's results table."""
    rows = [(label, v["questions"], v["accuracy"]) for label, v in summary["by_type"].items()]
    rows.append(("All", summary["questions"], summary["accuracy"]))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'type':<{width}}  questions  accuracy", f"{'-' * width}  ---------  --------"]
    lines += [f"{label:<{width}}  {count:>9}  {100 * accuracy:>7.1f}%" for label, count, accuracy in rows]
    return "\n".join(lines)
