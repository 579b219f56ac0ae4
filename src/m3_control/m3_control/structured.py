"""Structured replies: the JSON schema a model's reply is constrained to, and its parser.

Why: a small model asked for the text grammar ("Action: [Search]" / "Content: ...") often breaks
it; servers that constrain decoding to a JSON schema make every reply parse. The schema is built
per request: the action is an enum (only "answer" in the last round), a plan exists only for a
command (a pure question gets no plan field at all), and each plan step's skill is an enum of the
vocabulary with that skill's own argument names. The loop still validates every step against the
user's instruction (skills.validate_plan): the schema shapes replies, it is not the safety check.

`response_format` (parameter of the openai back-end): json_schema | json_object | none, as
m3_memory.memorize.json_reply describes; with none the reply is the reference text grammar (M3-Agent-Control
speaks it), parsed by reply_parser, and a JSON reply is read as well.
"""

from __future__ import annotations

import json

from m3_control.reasoner import Answer, Search
from m3_control.reply_parser import MalformedReply, parse_reply, strip_reasoning
from m3_control.skills import Skill
from m3_memory.memorize.json_reply import first_json_object
from m3_memory.memorize.json_reply import response_format as json_response_format

MAX_ANSWER_CHARS = 300  # a short answer; the grammar stops a small model rambling on
MAX_QUERY_CHARS = 150
MAX_PLAN_STEPS = 8


def _text(max_chars: int) -> dict:
    return {"type": "string", "minLength": 1, "maxLength": max_chars}


def step_schema(skill: Skill) -> dict:
    """One plan step of this skill: its name as a constant, its declared arguments only."""
    arguments = {name: {"type": "string"} for name in skill.arguments}
    return {
        "type": "object",
        "properties": {
            "skill": {"type": "string", "enum": [skill.name]},
            "target": {"type": "string"},
            "arguments": {
                "type": "object",
                "properties": arguments,
                "required": list(arguments),
                "additionalProperties": False,
            },
        },
        "required": ["skill", "target", "arguments"],
        "additionalProperties": False,
    }


def decision_schema(skills: dict[str, Skill], command: bool, must_answer: bool) -> dict:
    """The reply's JSON schema: {"action": "search", "query"} or {"action": "answer", "answer"[, "plan"]}."""
    answer: dict = {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": ["answer"]}, "answer": _text(MAX_ANSWER_CHARS)},
        "required": ["action", "answer"],
        "additionalProperties": False,
    }
    if command:
        # No skills: an empty plan only (an empty anyOf is a grammar llama-cpp-python's server cannot
        # parse, and it then stops serving every client; measured with a reasoner built without skills).
        steps = {"items": {"anyOf": [step_schema(skill) for skill in skills.values()]}, "maxItems": MAX_PLAN_STEPS}
        answer["properties"]["plan"] = {"type": "array", **(steps if skills else {"maxItems": 0})}
        answer["required"].append("plan")
    if must_answer:
        return answer
    search = {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": ["search"]}, "query": _text(MAX_QUERY_CHARS)},
        "required": ["action", "query"],
        "additionalProperties": False,
    }
    return {"anyOf": [search, answer]}


def response_format(kind: str, schema: dict) -> dict | None:
    """The request's `response_format` for a kind of RESPONSE_FORMATS (None: send none)."""
    return json_response_format(kind, schema, "decision")


def decision_json(decision: Search | Answer) -> str:
    """A decision written as the JSON a constrained model replies (for turns the model did not write)."""
    if isinstance(decision, Search):
        return json.dumps({"action": "search", "query": decision.query}, ensure_ascii=False)
    data: dict = {"action": "answer", "answer": decision.text}
    if decision.plan:
        data["plan"] = list(decision.plan)
    return json.dumps(data, ensure_ascii=False)


def parse_json_reply(text: str) -> Search | Answer:
    """Search or Answer from a JSON reply; MalformedReply (re-asked) when it is not one."""
    body = strip_reasoning(text)
    data = first_json_object(body)
    if data is None:
        raise MalformedReply("the reply is not a JSON object (was it cut off by max_tokens?)")
    action = str(data.get("action", "")).strip().lower()
    content = data.get("query" if action == "search" else "answer", data.get("content", data.get("text", "")))
    content = str(content or "").strip()
    if action not in ("search", "answer"):
        raise MalformedReply('"action" must be "search" or "answer"')
    if not content:
        raise MalformedReply(f'empty "{"query" if action == "search" else "answer"}"')
    raw = json.dumps(data, ensure_ascii=False)
    if action == "search":
        return Search(query=content.splitlines()[0].strip(), raw=raw)
    plan = data.get("plan") or []
    if not isinstance(plan, list):
        raise MalformedReply('"plan" must be a list of steps')
    return Answer(text=content, plan=tuple(plan), raw=raw)


def parse_any(text: str) -> Search | Answer:
    """A reply in the reference text grammar, or a JSON object (some models answer JSON unasked)."""
    body = strip_reasoning(text)
    if body.lstrip().startswith("{"):
        return parse_json_reply(body)
    return parse_reply(text)
