"""Ask M3-Bench-format questions through the real Instruct action, judge them, record the results.

For each episode the memory node (serving that episode's memory directory) and the control node
run in this process on a MultiThreadedExecutor, exactly as `m3 run` starts them, and every
question goes to them as an Instruct goal over DDS with the question's as-of limit (before_clip).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from m3_agent.evaluation.annotations import Question
from m3_agent.evaluation.report import append, read_done

Judge = Callable[[str, str, str], bool]  # (question, ground truth, answer) -> verdict


class SuiteSession:
    """memory_node + control_node for one memory directory, and an Instruct action client."""

    def __init__(
        self,
        memory_dir: Path,
        params_file: str,
        action: str = "/m3/instruct",
        overrides: dict[str, dict[str, object]] | None = None,
    ) -> None:
        from rclpy.action import ActionClient
        from rclpy.node import Node

        from m3_agent import bringup
        from m3_agent.recording.player import spinning
        from m3_interfaces.action import Instruct

        overrides = {node: dict(values) for node, values in (overrides or {}).items()}
        overrides.setdefault("memory_node", {})["memory_dir"] = str(memory_dir)
        self._stack = contextlib.ExitStack()
        try:
            nodes, executor = self._stack.enter_context(
                bringup.running_nodes(params_file, ("memory_node", "control_node"), overrides)
            )
            if getattr(nodes[0], "store_error", ""):
                raise RuntimeError(nodes[0].store_error)
            client_node = Node("m3_eval_client")

            self._stack.callback(client_node.destroy_node)
            executor.add_node(client_node)
            # Spun in short steps on a thread joined at close, before the node and the context go: a
            # daemon thread still inside executor.spin() at interpreter exit aborts the process (exit 134).
            self._stack.enter_context(spinning(executor))
            self._client = ActionClient(client_node, Instruct, action)
            self._goal_type = Instruct.Goal
            if not self._client.wait_for_server(timeout_sec=30.0):
                raise RuntimeError(f"the control node's action {action} did not come up")
        except BaseException:
            self._stack.close()
            raise

    @staticmethod
    def _wait(future, timeout_s: float):
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        if not done.wait(timeout_s):
            raise TimeoutError(f"no reply within {timeout_s} s")
        return future.result()

    def ask(self, question: str, before_clip: int = -1, max_rounds: int = 5, timeout_s: float = 600.0) -> dict:
        started = time.perf_counter()
        goal = self._goal_type(instruction=question, max_rounds=max_rounds, before_clip=before_clip)
        handle = self._wait(self._client.send_goal_async(goal), 30.0)
        if not handle.accepted:
            return {"answer": "", "evidence_ids": [], "plan": [], "rounds": 0, "error": "goal rejected"}
        result = self._wait(handle.get_result_async(), timeout_s).result
        return {
            "answer": result.answer,
            "evidence_ids": list(result.evidence_ids),
            "plan": [{"skill": s.skill, "target": s.target} for s in result.plan],
            "rounds": int(result.rounds_used),
            "error": result.error_message if result.error_code else "",
            "answered_by": result.answered_by,
            "seconds": round(time.perf_counter() - started, 3),
        }

    def close(self) -> None:
        self._stack.close()


def memory_dir_of(episodes_dir: Path, episode_id: str) -> Path:
    """<episodes>/<id>/memory (what `m3 replay --memory` wrote), or <episodes>/<id> itself. The store
    is opened read-only once here, so an empty, foreign, damaged or newer one stops the evaluation
    (StoreError) before any question is asked, instead of being answered from as an empty memory."""
    from m3_memory.store.sqlite_store import MemoryStore

    for candidate in (episodes_dir / episode_id / "memory", episodes_dir / episode_id):
        if os.path.lexists(candidate / "memory.sqlite3"):
            MemoryStore(str(candidate), create=False, readonly=True).close()
            return candidate
    raise FileNotFoundError(
        f"no memory for episode {episode_id} in {episodes_dir} (expected {episodes_dir / episode_id / 'memory'}; "
        f"build it with: m3 video2bag VIDEO BAG && m3 replay BAG --memory {episodes_dir / episode_id / 'memory'})"
    )


def evaluate(
    questions: Iterable[Question],
    episodes_dir: str | Path,
    out_jsonl: str | Path,
    judge: Judge,
    judge_method: str,
    params_file: str,
    max_rounds: int = 5,
    on_result: Callable[[dict], None] | None = None,
    overrides: dict[str, dict[str, object]] | None = None,
) -> list[dict]:
    """Answer and judge every question not yet in out_jsonl; returns all records (old and new).
    overrides: node parameters over params_file's (e.g. the LLM profile's back-ends)."""
    episodes_dir = Path(episodes_dir)
    questions = list(questions)
    memory_dirs = {q.episode_id: memory_dir_of(episodes_dir, q.episode_id) for q in questions}  # fail before work
    done = read_done(out_jsonl)
    for episode_id, group in itertools.groupby(questions, key=lambda q: q.episode_id):
        todo = [q for q in group if q.question_id not in done]
        if not todo:
            continue
        session = SuiteSession(memory_dirs[episode_id], params_file, overrides=overrides)
        try:
            for q in todo:
                reply = session.ask(q.question, q.before_clip, max_rounds)
                record = {
                    "question_id": q.question_id,
                    "episode_id": q.episode_id,
                    "question": q.question,
                    "asked_at": q.as_of,
                    "before_clip": q.before_clip,
                    "type": list(q.types),
                    "answer": reply["answer"],
                    "ground_truth": q.answer,
                    "verdict": bool(reply["answer"]) and judge(q.question, q.answer, reply["answer"]),
                    "judge": judge_method,
                    "rounds": reply["rounds"],
                    "evidence": reply["evidence_ids"],
                    "plan": reply["plan"],
                    "error": reply["error"],
                    "answered_by": reply.get("answered_by", ""),
                    "seconds": reply.get("seconds", 0.0),
                }
                append(out_jsonl, record)
                done[q.question_id] = record
                if on_result is not None:
                    on_result(record)
        finally:
            session.close()
    wanted = {q.question_id for q in questions}
    return [record for qid, record in done.items() if qid in wanted]
