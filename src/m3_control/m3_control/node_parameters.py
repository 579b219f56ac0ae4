"""The control node's parameters: name -> (default, descriptor with its range), checked at configure
(m3_runtime.parameter_checks); config/m3.yaml and the control README list them for users."""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

from m3_control.action_qos import DEFAULT_DEPTH
from m3_control.backends import BACKENDS
from m3_runtime.managed_node import AUTOSTART


def _float(description: str, low: float, high: float) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=description,
        floating_point_range=[FloatingPointRange(from_value=low, to_value=high, step=0.0)],
        read_only=True,
    )


def _int(description: str, low: int, high: int) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=description, integer_range=[IntegerRange(from_value=low, to_value=high, step=1)], read_only=True
    )


def _text(description: str, read_only: bool = True) -> ParameterDescriptor:
    return ParameterDescriptor(description=description, read_only=read_only)


# name: (default, descriptor). Everything but goal_policy is read once at start-up, hence read-only.
PARAMETERS: dict[str, tuple[Any, ParameterDescriptor]] = {
    "autostart": AUTOSTART,
    "backend": ("extractive", _text(f"reasoner back-end: one of {', '.join(BACKENDS)}")),
    "endpoint": ("http://localhost:8000/v1", _text("openai back-end: base URL of an OpenAI-compatible API")),
    "model": ("M3-Agent-Control", _text("openai: model name sent to the endpoint; vllm: local weights directory")),
    "api_key_env": ("OPENAI_API_KEY", _text("environment variable holding the endpoint's API key (unset: none sent)")),
    "temperature": (0.6, _float("sampling temperature (reference 0.6)", 0.0, 2.0)),
    "top_p": (0.95, _float("nucleus sampling top_p (reference 0.95)", 0.0, 1.0)),
    "max_tokens": (1024, _int("most tokens per model reply (reference 1024)", 1, 32768)),
    "timeout_s": (60.0, _float("seconds to wait for one model reply", 0.1, 3600.0)),
    "retries": (2, _int("model requests retried after a transport failure, then MODEL_UNREACHABLE", 0, 10)),
    "reasks": (2, _int("re-asks after a malformed reply or a rejected plan, then MODEL_ERROR", 0, 10)),
    "response_format": (
        "none",
        _text(
            "openai: reply constraint: json_schema (vLLM, llama-server), json_object (+schema: llama.cpp servers), none"
        ),
    ),
    "stream": (True, _text("openai: stream replies, so a cancel also stops the server generating")),
    "knowledge": ("reference", _text("openai: knowledge turns: reference (clips as JSON) or compact (small models)")),
    "knowledge_limit": (8, _int("openai, compact knowledge: new memories shown per search", 1, 100)),
    "prefetch": (0, _int("openai: searches before the model is first asked (0: it picks every query)", 0, 10)),
    "system_prompt_file": (
        "",
        _text("prompt file with {skills}; empty: prompts/system_json.txt with a response_format, else system.txt"),
    ),
    "skills_file": ("", _text("skill vocabulary YAML; empty: the installed config/skills.yaml")),
    "top_k": (2, _int("clips per search_clip (reference 2)", 1, 100)),
    "threshold": (0.5, _float("minimum clip score for search_clip, cosine (reference 0.5)", -1.0, 1.0)),
    "node_top_k": (20, _int("memory nodes per search_node for character-id queries (reference 20)", 1, 100)),
    "rules_when_unsure": (
        True,
        _text("a model reasoner's 'I don't know' is replaced by the rules' (extractive) answer when they find one"),
    ),
    "default_max_rounds": (5, _int("rounds used when a goal sets max_rounds 0", 1, 20)),
    "max_instruction_chars": (2000, _int("longest instruction accepted, else INVALID_GOAL", 1, 100000)),
    "memory_prefix": ("m3/memory", _text("namespace of the memory services search_clip, search_node, get_entity")),
    "search_robot_id": (
        "",
        _text("whose memories searches cover: '' = every robot sharing the memory (a fleet's), else that robot's"),
    ),
    "regions_file": (
        "",
        _text("YAML of named regions (the memory node's): navigate_to goes to a named region's centre; empty = none"),
    ),
    "utc_offset_s": (
        0,
        _int("the askers' offset from UTC, for the day boundaries of 'this morning', 'yesterday' [s]", -50400, 50400),
    ),
    "objects_topic": (
        "m3/objects",
        _text("perception's ObjectTracks, for 'Can you see a cup?' (view.py); '' = not followed"),
    ),
    "texts_topic": ("m3/texts", _text("perception's TextRegions, for 'Can you see a note?'; '' = not followed")),
    "view_window_s": (1.0, _float("an object seen this long before the newest image is still in view [s]", 0.0, 60.0)),
    "view_max_age_s": (
        3.0,
        _float(
            "no objects for this long (wall clock): what is in view now is unknown, and the answer says so [s]",
            0.1,
            600.0,
        ),
    ),
    "memory_timeout_s": (5.0, _float("seconds to wait for a memory service, then MEMORY_UNAVAILABLE", 0.1, 600.0)),
    "goal_policy": ("queue", _text("concurrent goals: queue, reject or preempt (may change at run time)", False)),
    "action_queue_depth": (
        DEFAULT_DEPTH,
        _int("goal/result/cancel requests held for the executor, >= clients sending at once (action_qos.py)", 1, 10000),
    ),
}
