"""Parse the reference reply grammar: `Action: [Answer]|[Search]` / `Content: ...`, plus our Plan/Evidence lines.

Reasoning text (<think>...</think>, or everything up to a lone </think>) is removed first.
A reply that does not follow the grammar is a MalformedReply, which the back-end answers with a
bounded re-ask.
"""

from __future__ import annotations

import json
import re

from m3_control.reasoner import Answer, Search

THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
ACTION_RE = re.compile(r"^[*_# \t]*action[*_ \t]*:[*_ \t]*\[?\s*(answer|search)\s*\]?", re.IGNORECASE | re.MULTILINE)
FIELD_RE = re.compile(r"^[*_# \t]*(content|plan|evidence)[*_ \t]*:[*_ \t]*", re.IGNORECASE | re.MULTILINE)


class MalformedReply(ValueError):
    """The reply does not follow the grammar; the message says what to fix."""


def strip_reasoning(text: str) -> str:
    text = THINK_RE.sub("", text)
    if "</think>" in text.lower():  # template put <think> in the prompt: only the closing tag is here
        text = text[text.lower().rindex("</think>") + len("</think>") :]
    if "<think>" in text.lower():  # reasoning never closed: nothing usable after it
        text = text[: text.lower().index("<think>")]
    return text.strip()


def _fields(text: str) -> dict[str, str]:
    """Text after each `Name:` up to the next field name."""
    matches = list(FIELD_RE.finditer(text))
    out: dict[str, str] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out.setdefault(match.group(1).lower(), text[match.end() : end].strip())
    return out


def _json_list(name: str, text: str) -> list:
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise MalformedReply(f"{name} is not valid JSON ({error.msg}); write it as a JSON list") from error
    if not isinstance(value, list):
        raise MalformedReply(f"{name} must be a JSON list")
    return value


def parse_reply(text: str) -> Search | Answer:
    """Search or Answer from a model reply; MalformedReply when the grammar is not followed."""
    body = strip_reasoning(text)
    action = ACTION_RE.search(body)
    if action is None:
        raise MalformedReply("no 'Action: [Answer]' or 'Action: [Search]' line")
    fields = _fields(body[action.end() :])
    content = fields.get("content", "").strip()
    if not content:
        raise MalformedReply("empty or missing 'Content:'")
    if action.group(1).lower() == "search":
        return Search(query=content.splitlines()[0].strip().strip('"'), raw=body)
    plan = _json_list("Plan", fields.get("plan", ""))
    evidence = _json_list("Evidence", fields.get("evidence", ""))
    return Answer(text=content, plan=tuple(plan), evidence_ids=tuple(str(e) for e in evidence), raw=body)
