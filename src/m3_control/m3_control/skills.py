"""The skill vocabulary (config/skills.yaml) and validation of plan steps against it and the instruction.

Why the instruction check: retrieved memories contain what people said on camera. A model that
reads "hand the keys to the stranger" in a transcript must not be able to turn that into a step,
so every step's skill must be requested by a word of the user's own instruction, and skills marked
target_from_instruction (hand_over) must act on someone the instruction names.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml


class SkillError(ValueError):
    """A plan step outside the vocabulary, with unknown arguments, or not requested by the instruction."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    target: str
    arguments: dict[str, str]
    requested_by: tuple[str, ...]
    target_from_instruction: bool = False


@dataclass(frozen=True)
class Step:
    """One plan step as plain data (PlanStep without ROS)."""

    skill: str
    target: str = ""
    arguments: dict[str, str] = field(default_factory=dict)
    pose: Any = None  # navigate_to: a nav_targets.TargetPose from memory or the regions file; None = unknown

    def as_dict(self) -> dict:
        return {"skill": self.skill, "target": self.target, "arguments": dict(self.arguments)}


USER_WORDS = ("me", "my", "i", "user", "myself")


def default_skills_file() -> str:
    """The installed config/skills.yaml of m3_agent, else the source tree's."""
    try:
        from ament_index_python.packages import get_package_share_directory

        path = os.path.join(get_package_share_directory("m3_agent"), "config", "skills.yaml")
        if os.path.isfile(path):
            return path
    except Exception:  # noqa: BLE001 - not installed (or ament_index missing): use the checkout
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "config", "skills.yaml"))


def load_skills(path: str | None = None) -> dict[str, Skill]:
    """Read the vocabulary; a missing or malformed file is a clear error naming the file."""
    path = path or default_skills_file()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"skills file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    entries = data.get("skills")
    if not isinstance(entries, dict) or not entries:
        raise ValueError(f"{path}: expected a non-empty mapping 'skills'")
    skills: dict[str, Skill] = {}
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: skill {name!r} must be a mapping")
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ValueError(f"{path}: skill {name!r}: 'arguments' must map names to descriptions")
        skills[name] = Skill(
            name=name,
            description=str(entry.get("description", "")),
            target=str(entry.get("target", "")),
            arguments={str(k): str(v) for k, v in arguments.items()},
            requested_by=tuple(str(w).lower() for w in entry.get("requested_by") or ()),
            target_from_instruction=bool(entry.get("target_from_instruction", False)),
        )
    return skills


def describe_skills(skills: dict[str, Skill]) -> str:
    """The vocabulary as prompt text."""
    lines = []
    for skill in skills.values():
        args = ", ".join(f'"{k}": {v}' for k, v in skill.arguments.items()) or "none"
        lines.append(f"- {skill.name}: {skill.description}; target = {skill.target}; arguments: {args}")
    return "\n".join(lines)


WH_WORDS = ("who", "whom", "whose", "what", "where", "when", "which", "why", "how")
QUESTION_STARTS = (*WH_WORDS, "did", "does", "do", "is", "are", "was", "were", "has", "have", "had")
# A question may open with a preposition: "At what time ...?", "On which day ...?", "With whom ...?"
QUESTION_PREPOSITIONS = (
    "at", "on", "in", "by", "for", "from", "to", "with", "until", "till", "since", "about", "after", "before",
    "during", "into", "of",
)  # fmt: skip
LEADING_PREPOSITION_RE = re.compile(rf"^(?:{'|'.join(QUESTION_PREPOSITIONS)})\s+(?=(?:{'|'.join(WH_WORDS)})\b)")


def question_core(instruction: str) -> str:
    """The instruction in lower case without a preposition before its question word: "At what time ...?"
    asks what "What time ...?" asks."""
    return LEADING_PREPOSITION_RE.sub("", instruction.lower().strip())


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def is_question(instruction: str) -> bool:
    """A pure question ("Where did Alice put the keys?") asks for no robot action; "Can you bring..." does."""
    words = _words(question_core(instruction))
    return bool(words) and words[0] in QUESTION_STARTS


def _requests(words: list[str], verb: str) -> bool:
    """Whether an instruction word is the verb or a regular inflection of it (go/goes/going, not good)."""
    forms = {verb, verb + "s", verb + "es", verb + "ing", verb + "ed", verb + verb[-1] + "ing"}
    if verb.endswith("e"):
        forms |= {verb[:-1] + "ing", verb + "d"}
    return any(word in forms for word in words)


def step_from_dict(raw: object) -> Step:
    """A step from the model's JSON shape; wrong types are a SkillError."""
    if not isinstance(raw, dict):
        raise SkillError(f"plan step must be an object, got {raw!r}")
    unknown_keys = set(raw) - {"skill", "target", "arguments"}
    if unknown_keys:
        raise SkillError(f"plan step has unknown keys {sorted(unknown_keys)}")
    skill = raw.get("skill")
    target = raw.get("target", "")
    arguments = raw.get("arguments") or {}
    if not isinstance(skill, str) or not isinstance(target, str) or not isinstance(arguments, dict):
        raise SkillError(f"plan step needs skill (text), target (text), arguments (object): {raw!r}")
    return Step(skill=skill, target=target, arguments={str(k): str(v) for k, v in arguments.items()})


def validate_step(step: Step, skills: dict[str, Skill], instruction: str) -> None:
    """Raise SkillError unless the step is in the vocabulary, has declared arguments only, and is asked for."""
    skill = skills.get(step.skill)
    if skill is None:
        raise SkillError(f"unknown skill {step.skill!r}; the vocabulary is {sorted(skills)}")
    unknown = sorted(set(step.arguments) - set(skill.arguments))
    if unknown:
        raise SkillError(f"skill {step.skill!r} has no argument(s) {unknown}; allowed: {sorted(skill.arguments)}")
    words = _words(instruction)
    if is_question(instruction):
        raise SkillError(f"the instruction {instruction!r} is a question: it asks for no plan step ({step.skill!r})")
    if not any(_requests(words, verb) for verb in skill.requested_by):
        raise SkillError(f"skill {step.skill!r} is not requested by the instruction {instruction!r}")
    if skill.target_from_instruction:
        target_words = [w for w in _words(step.target) if w not in ("the", "a", "an", "to")]
        named = bool(target_words) and all(w in words for w in target_words)
        if not named and not (set(target_words) <= set(USER_WORDS) and set(USER_WORDS) & set(words)):
            hint = (
                "; 'me' in the instruction is the person giving it: use target 'me'"
                if set(USER_WORDS) & set(words)
                else "; use the person exactly as the instruction names them"
            )
            raise SkillError(
                f"skill {step.skill!r} must act on someone the instruction names; {step.target!r} is not named{hint}"
            )


def unnamed_objects(answer: str, steps: list[Step]) -> list[str]:
    """Objects the plan picks that the answer does not name ("I will bring Bob his usual drink").

    Why: the answer is what the user hears; a plan that fetches the black coffee while the answer
    only repeats the instruction's words leaves the user unable to tell what is coming.
    """
    said = set(_words(answer))
    missing = []
    for step in steps:
        words = [w for w in _words(step.target) if len(w) > 2 and w not in ("the", "and", "with")]
        if step.skill == "pick" and words and not said & set(words):
            missing.append(step.target)
    return missing


def validate_plan(raw_steps: list, skills: dict[str, Skill], instruction: str) -> list[Step]:
    """All steps validated, or SkillError naming the first bad one."""
    if not isinstance(raw_steps, list):
        raise SkillError(f"plan must be a list of steps, got {type(raw_steps).__name__}")
    steps = [raw if isinstance(raw, Step) else step_from_dict(raw) for raw in raw_steps]
    for step in steps:
        validate_step(step, skills, instruction)
    return steps
