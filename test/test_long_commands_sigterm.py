"""Issue 21: `m3 eval` and `m3 demo` end cleanly on SIGTERM, as `m3 replay`, `m3 play` and the node
commands do (test_child_processes.py, test_node_sigterm.py): exit 0, a last JSON line that says they were
stopped and where, no traceback, and a re-run goes on from what was kept. Real commands, real processes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import numpy as np

S = 1_000_000_000
QUESTIONS = 40  # more than are answered before the signal


def _memory(directory) -> None:
    """A small real memory (rules memorizer): two clips of speech."""
    from m3_memory.graph.records import ClipEvidence, VoiceEvidence
    from m3_memory.memory import Memory

    def voice(voice_id: str, t0: float, text: str) -> VoiceEvidence:
        vector = np.random.default_rng(int(voice_id[-1])).normal(size=192)
        return VoiceEvidence(
            voice_id, int(t0 * S), int((t0 + 2) * S), text, 0.9, list(vector / np.linalg.norm(vector)), 0
        )

    memory = Memory.open(str(directory))
    try:
        for index, lines in enumerate([[("voice_1", "The keys are in the kitchen drawer.")],
                                       [("voice_2", "The meeting is on Friday at ten.")]]):  # fmt: skip
            start = index * 30 * S
            voices = [voice(v, index * 30 + 1, text) for v, text in lines]
            memory.ingest(ClipEvidence(index, start, start + 30 * S, [], voices, []))
    finally:
        memory.close()


def _annotations(path) -> None:
    qa = [
        {"question": f"Where are the keys? ({n})", "answer": "in the kitchen drawer", "question_id": f"q{n:02d}",
         "type": ["Multi-Detail Reasoning"], "timestamp": "01:00", "before_clip": 1}
        for n in range(QUESTIONS)
    ]  # fmt: skip
    path.write_text(json.dumps({"tiny": {"video_path": "", "mem_path": "", "qa_list": qa}}))


def _stop(command: list[str], ready, limit_s: float) -> tuple[int, str, str]:
    """Run command, SIGTERM it once ready(stderr so far) or after limit_s, and return (rc, stdout, stderr)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and process.poll() is None and not ready("".join(lines)):
        time.sleep(0.2)
    assert process.poll() is None, f"ended before the signal: {''.join(lines)[-2000:]}"
    process.send_signal(signal.SIGTERM)
    out = process.stdout.read()
    process.wait(timeout=180)
    reader.join(timeout=10)
    return process.returncode, out, "".join(lines)


def test_sigterm_of_m3_eval_keeps_the_answers_and_says_how_many(tmp_path):
    _memory(tmp_path / "episodes" / "tiny" / "memory")
    _annotations(tmp_path / "robot.json")
    results = tmp_path / "results.jsonl"
    command = [sys.executable, "-m", "m3_agent.cli", "eval", "--annotations", str(tmp_path / "robot.json"),
               "--episodes", str(tmp_path / "episodes"), "--out", str(results), "--llm", "none"]  # fmt: skip
    rc, out, err = _stop(command, lambda seen: seen.count("-> ") >= 2, limit_s=240)
    assert rc == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    line = json.loads(out.strip().splitlines()[-1])
    assert line["stopped"] == "sigterm" and 2 <= line["answered"] < QUESTIONS
    kept = [json.loads(row) for row in results.read_text().splitlines()]
    assert len(kept) == line["answered"]  # what it said it answered is on disk, whole
    again = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["questions"] == QUESTIONS  # resumed, not redone
    assert len(results.read_text().splitlines()) == QUESTIONS


def test_sigterm_of_m3_demo_ends_cleanly_and_says_it_stopped(tmp_path):
    out_dir = tmp_path / "demo"
    command = [sys.executable, "-m", "m3_agent.cli", "demo", "--out", str(out_dir), "--llm", "none", "--quiet"]
    rc, out, err = _stop(command, lambda seen: "== 3/5" in seen, limit_s=600)  # as the replay starts
    assert rc == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    line = json.loads(out.strip().splitlines()[-1])
    assert line["stopped"] == "sigterm" and line["out"] == str(out_dir)
