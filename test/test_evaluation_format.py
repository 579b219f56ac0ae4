"""M3-Bench annotations are read exactly; results are resumable and summarised by type."""

import json
from pathlib import Path

import pytest

from m3_agent.evaluation import annotations, report

M3BENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "m3bench"


@pytest.mark.skipif(not (M3BENCH / "robot.json").exists(), reason="shared/data/m3bench is not beside the checkout")
def test_reads_the_published_robot_and_web_annotations():
    robot = annotations.load(M3BENCH / "robot.json")
    assert len(robot) == 1276
    assert len({q.episode_id for q in robot}) == 100
    first = next(q for q in robot if q.question_id == "living_room_06_Q01")
    assert (first.asked_at_s, first.before_clip, first.types) == (43.0, 0, ("Cross-Modal Reasoning",))
    # M3-Bench's own rule, checked on every robot question
    assert all(q.before_clip == int(q.asked_at_s // 30) - 1 for q in robot)
    web = annotations.load(M3BENCH / "web.json")
    assert len(web) == 3214 and all(q.asked_at_s is None and q.before_clip == -1 for q in web)


def test_rejects_malformed_annotations(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ep": {"qa_list": [{"question": "q", "answer": "a"}]}}))
    with pytest.raises(annotations.AnnotationError, match="lacks"):
        annotations.load(bad)
    bad.write_text("{not json")
    with pytest.raises(annotations.AnnotationError, match="cannot read"):
        annotations.load(bad)
    with pytest.raises(annotations.AnnotationError, match="MM:SS"):
        annotations.parse_timestamp("12:75")
    with pytest.raises(FileNotFoundError):
        annotations.load(tmp_path / "missing.json")


def test_summary_counts_each_label_and_resume_skips_torn_lines(tmp_path):
    jsonl = tmp_path / "results.jsonl"
    report.append(jsonl, {"question_id": "a", "type": ["Person Understanding"], "verdict": True})
    report.append(
        jsonl, {"question_id": "b", "type": ["Person Understanding", "Multi-Hop Reasoning"], "verdict": False}
    )
    with open(jsonl, "a") as out:
        out.write('{"question_id": "c", "ty')  # killed mid-write
    done = report.read_done(jsonl)
    assert set(done) == {"a", "b"}
    summary = report.summarize(list(done.values()))
    assert summary["accuracy"] == 0.5
    assert summary["by_type"]["Person Understanding"] == {"questions": 2, "accuracy": 0.5}
    assert summary["by_type"]["Multi-Hop Reasoning"] == {"questions": 1, "accuracy": 0.0}
    assert list(summary["by_type"]) == ["Multi-Hop Reasoning", "Person Understanding"]  # the paper's order
    table = report.format_table(summary)
    assert table.splitlines()[-1].split() == ["All", "2", "50.0%"]


def test_eval_session_joins_its_spin_thread_before_teardown(tmp_path):
    """`m3 eval` spun its executor on a daemon thread that nobody joined: a thread still inside
    executor.spin() when the interpreter exits aborts the process (exit 134, as `m3 play` did; a
    race, too rare to catch by running the command). The session's threads must be ones the
    interpreter waits for (not daemons), and none may still run once the session is closed."""
    import threading

    from m3_agent.bringup import default_params_file
    from m3_agent.evaluation.runner import SuiteSession

    before = set(threading.enumerate())
    session = SuiteSession(tmp_path / "memory", default_params_file())
    spinners = [t for t in threading.enumerate() if t not in before and "spin" in t.name]
    session.close()
    assert spinners, "the session spins its executor on a thread of its own"
    assert [t.name for t in spinners if t.daemon] == []
    assert [t.name for t in spinners if t.is_alive()] == []
