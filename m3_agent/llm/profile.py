"""The LLM profile (config/llm.yaml): which language model the bring-up gives the memorizer and the
reasoner. It is a file of its own, not a node's ros__parameters, because it configures the bring-up
(a server process, a choice for two nodes at once) rather than one node."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from m3_agent.llm.models import DEFAULT_MODEL, config_file

MODES = ("none", "embedded", "endpoint")
# How the nodes speak to each mode's model unless a profile's `params` says otherwise (config/llm.yaml).
EMBEDDED_PARAMS = {  # a small local model behind llama.cpp's llama-server
    "memory_node": {"openai_response_format": "json_object", "openai_keyframes": 0},
    "control_node": {
        "response_format": "json_object",
        "knowledge": "compact",
        "prefetch": 1,
        "temperature": 0.0,
        "max_tokens": 256,
    },
}
ENDPOINT_PARAMS = {  # vLLM serving M3-Agent-Memorization (a vision model) and M3-Agent-Control
    "memory_node": {"openai_response_format": "json_schema", "openai_keyframes": 4},
    "control_node": {"response_format": "none", "knowledge": "reference"},
}


def _copy(params: dict) -> dict:
    return {node: dict(values) for node, values in params.items()}


@dataclass
class EmbeddedSettings:
    model: str = DEFAULT_MODEL  # packaged model name or a .gguf path
    sha256: str = ""
    server: str = ""  # a llama-server binary (e.g. a CUDA build); empty: the one set-up built
    host: str = "127.0.0.1"
    port: int = 8080
    threads: int = 0  # generation threads; 0: every core but one (server.generation_threads)
    threads_batch: int = 0  # prompt-reading threads; 0: every core
    context: int = 8192
    prompt_cache_mb: int = 1024
    start_timeout_s: float = 180.0
    request_timeout_s: float = 300.0
    log_file: str = ""
    extra_args: list[str] = field(default_factory=list)
    # node -> {parameter: value} this mode sets (under the user's --set): how the nodes speak to
    # this model (a small local model: constrained JSON, compact knowledge; see config/llm.yaml)
    params: dict = field(default_factory=lambda: _copy(EMBEDDED_PARAMS))


@dataclass
class EndpointSettings:
    memorizer_url: str = "http://localhost:8000/v1"
    memorizer_model: str = "M3-Agent-Memorization"
    control_url: str = "http://localhost:8001/v1"
    control_model: str = "M3-Agent-Control"
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_s: float = 60.0
    check: bool = True
    params: dict = field(default_factory=lambda: _copy(ENDPOINT_PARAMS))  # as in EmbeddedSettings


@dataclass
class LLMProfile:
    llm: str = "none"
    embedded: EmbeddedSettings = field(default_factory=EmbeddedSettings)
    endpoint: EndpointSettings = field(default_factory=EndpointSettings)
    source: str = ""  # the file it came from, for messages


def default_profile_file() -> Path:
    return config_file("llm.yaml")


def _section(cls: type, data: object, where: str):
    """A settings dataclass from a mapping; unknown keys and wrong types are errors naming them."""
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown setting(s) {unknown}; known: {sorted(fields)}")
    values = {}
    defaults = cls()
    for name, value in data.items():
        expected = type(getattr(defaults, name))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ValueError(f"{where}.{name} must be {expected.__name__}, got {value!r}")
        values[name] = value
    if "params" in values:
        _check_params(values["params"], f"{where}.params")
    return cls(**values)


NODES = ("perception_node", "memory_node", "control_node")


def _check_params(params: dict, where: str) -> None:
    """params must map node names to {parameter: value}; the nodes check names and values."""
    for node, values in params.items():
        if node not in NODES:
            raise ValueError(f"{where}: unknown node {node!r}; known: {list(NODES)}")
        if not isinstance(values, dict):
            raise ValueError(f"{where}.{node} must be a mapping of parameter: value, got {values!r}")


def parse_profile(data: object, source: str = "") -> LLMProfile:
    where = source or "LLM profile"
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping with llm, embedded, endpoint")
    unknown = sorted(set(data) - {"llm", "embedded", "endpoint"})
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: llm, embedded, endpoint")
    profile = LLMProfile(
        llm=str(data.get("llm", "none")),
        embedded=_section(EmbeddedSettings, data.get("embedded"), f"{where}: embedded"),
        endpoint=_section(EndpointSettings, data.get("endpoint"), f"{where}: endpoint"),
        source=source,
    )
    return with_mode(profile, profile.llm)


def with_mode(profile: LLMProfile, mode: str | None) -> LLMProfile:
    """The profile with `llm` replaced (the --llm flag), checked."""
    mode = profile.llm if mode is None else mode
    if mode not in MODES:
        where = f" ({profile.source})" if profile.source else ""
        raise ValueError(f"llm must be one of {list(MODES)}, got {mode!r}{where}")
    return dataclasses.replace(profile, llm=mode)


def load_profile(path: str | Path | None = None, mode: str | None = None) -> LLMProfile:
    """The profile from `path` (default: the installed config/llm.yaml), `mode` overriding its llm."""
    path = Path(path).expanduser() if path else default_profile_file()
    if not path.is_file():
        raise FileNotFoundError(f"LLM profile not found: {path}")
    return with_mode(parse_profile(yaml.safe_load(path.read_text()), str(path)), mode)
