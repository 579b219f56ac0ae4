"""Constrained JSON replies of OpenAI-compatible chat servers, for every model back-end (the
memorizer here, the reasoner in m3_control): how to ask for a schema, and how to read the reply.

`response_format` kinds:
  json_schema - {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}: the OpenAI
                protocol, accepted by vLLM and by llama.cpp's own server (llama-server);
  json_object - {"type": "json_object", "schema": ...}: llama-cpp-python's server (0.3.x accepts
                only "text" and "json_object", the schema turned into a grammar), llama-server too;
  none        - no constraint (a reply is still read leniently).
"""

from __future__ import annotations

import json
import re

RESPONSE_FORMATS = ("json_schema", "json_object", "none")


def response_format(kind: str, schema: dict, name: str, parameter: str = "response_format") -> dict | None:
    """The request's `response_format` for a kind of RESPONSE_FORMATS (None: send none); ValueError
    naming `parameter` for another kind."""
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if kind == "json_object":
        return {"type": "json_object", "schema": schema}
    if kind == "none":
        return None
    raise ValueError(f"{parameter} must be one of {list(RESPONSE_FORMATS)}, got {kind!r}")


def first_json_object(text: str) -> dict | None:
    """The first JSON object in a reply (tolerates code fences and prose around it)."""
    text = re.sub(r"```(?:json)?", "", text)
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        try:
            value, _ = decoder.raw_decode(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None
