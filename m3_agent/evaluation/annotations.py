"""Read M3-Bench question annotations (robot.json and web.json share one layout).

A file maps an episode id to {"video_path", "mem_path", "qa_list"}; each question has
question, answer, question_id, type (a list of labels) and, for robot episodes, timestamp
("MM:SS", when it is asked) and before_clip (only clips 0..before_clip may be used).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

ROBOT_TYPES = (
    "Multi-Detail Reasoning",
    "Multi-Hop Reasoning",
    "Cross-Modal Reasoning",
    "Person Understanding",
    "General Knowledge Extraction",
)


class AnnotationError(ValueError):
    """The annotation file does not follow the M3-Bench layout."""


@dataclass(frozen=True)
class Question:
    episode_id: str
    question_id: str
    question: str
    answer: str
    types: tuple[str, ...]
    asked_at_s: float | None  # None: asked after the whole video (web.json)
    before_clip: int  # -1: no limit

    @property
    def as_of(self) -> str:
        return "end" if self.asked_at_s is None else f"{int(self.asked_at_s // 60):02d}:{int(self.asked_at_s % 60):02d}"


def parse_timestamp(text: str) -> float:
    """'MM:SS' or 'HH:MM:SS' -> seconds."""
    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError as error:
        raise AnnotationError(f"timestamp must be MM:SS, got {text!r}") from error
    if not 2 <= len(parts) <= 3 or any(p < 0 for p in parts) or parts[-1] >= 60:
        raise AnnotationError(f"timestamp must be MM:SS, got {text!r}")
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + part
    return float(seconds)


def load(path: str | Path, episodes: list[str] | None = None) -> list[Question]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AnnotationError(f"cannot read annotations {path}: {error}") from error
    if not isinstance(data, dict):
        raise AnnotationError(f"{path}: expected an object keyed by episode id")
    unknown = set(episodes or ()) - set(data)
    if unknown:
        raise AnnotationError(f"{path}: no episode(s) {sorted(unknown)}")
    questions = []
    for episode_id, entry in data.items():
        if episodes and episode_id not in episodes:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("qa_list"), list):
            raise AnnotationError(f"{path}: episode {episode_id!r} has no qa_list")
        for index, qa in enumerate(entry["qa_list"]):
            where = f"{path}: {episode_id} question {index}"
            missing = {"question", "answer", "question_id", "type"} - set(qa)
            if missing:
                raise AnnotationError(f"{where} lacks {sorted(missing)}")
            types = qa["type"] if isinstance(qa["type"], list) else [qa["type"]]
            asked = parse_timestamp(qa["timestamp"]) if qa.get("timestamp") else None
            before_clip = int(qa.get("before_clip", -1))
            questions.append(
                Question(
                    episode_id,
                    str(qa["question_id"]),
                    str(qa["question"]),
                    str(qa["answer"]),
                    tuple(str(t) for t in types),
                    asked,
                    before_clip,
                )
            )
    return questions
