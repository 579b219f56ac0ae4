"""The model service of a bring-up: from an LLM profile to a running (or reachable) model and the
node parameters that point the memorizer and the reasoner at it.

`model_service(profile)` is a context manager: with `embedded` it resolves and checks the GGUF,
starts or reuses the llama.cpp server and stops it on exit (Ctrl-C included); with `endpoint` it
checks the user's server(s) answer with the configured models; with `none` it does nothing. Errors
are raised, never turned into another mode.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from m3_agent.llm import models
from m3_agent.llm.profile import EmbeddedSettings, LLMProfile
from m3_agent.llm.server import LlamaServer, ServerConfig, ServerError, is_program, served_models

Overrides = dict[str, dict[str, object]]


def _stderr(text: str) -> None:
    print(f"m3: {text}", file=sys.stderr, flush=True)


@dataclass
class ModelService:
    """Where the memorizer and the reasoner send their requests (mode none: nowhere)."""

    mode: str
    memorizer_url: str = ""
    memorizer_model: str = ""
    control_url: str = ""
    control_model: str = ""
    api_key_env: str = ""
    request_timeout_s: float = 60.0
    server: LlamaServer | None = None
    params: dict[str, dict[str, object]] = field(default_factory=dict)  # the mode's own node parameters

    def overrides(self) -> Overrides:
        """memory_node and control_node parameters selecting the openai back-ends ({} for none)."""
        if self.mode == "none":
            return {}
        base: Overrides = {
            "memory_node": {
                "memorizer": "openai",
                "openai_endpoint": self.memorizer_url,
                "openai_model": self.memorizer_model,
                "openai_api_key_env": self.api_key_env,
                "openai_timeout_s": self.request_timeout_s,
            },
            "control_node": {
                "backend": "openai",
                "endpoint": self.control_url,
                "model": self.control_model,
                "api_key_env": self.api_key_env,
                "timeout_s": self.request_timeout_s,
            },
        }
        for node, values in self.params.items():
            base.setdefault(node, {}).update(values)
        return base

    def merged(self, user: Overrides | None = None) -> Overrides:
        """These overrides under the user's own (--set wins over the profile)."""
        merged = {node: dict(values) for node, values in self.overrides().items()}
        for node, values in (user or {}).items():
            merged.setdefault(node, {}).update(values)
        return merged

    def describe(self) -> str:
        if self.mode == "none":
            return "no language model (node parameters decide: rules memorizer, extractive reasoner by default)"
        if self.memorizer_url == self.control_url and self.memorizer_model == self.control_model:
            return f"{self.mode} language model {self.control_model} at {self.control_url}"
        return (
            f"{self.mode} language models: memorizer {self.memorizer_model} at {self.memorizer_url}, "
            f"reasoner {self.control_model} at {self.control_url}"
        )


def server_config(settings: EmbeddedSettings) -> ServerConfig:
    """The checked GGUF and the server settings of an embedded profile (ModelError when the file is bad,
    ServerError when embedded.server names no executable file)."""
    path, name = models.resolve(settings.model, settings.sha256)
    command = []
    if settings.server:
        binary = Path(settings.server).expanduser()
        if not is_program(binary):
            raise ServerError(f"embedded.server in the LLM profile is {settings.server!r}: no executable file there")
        command = [str(binary)]
    return ServerConfig(
        model_path=path,
        model=name,
        host=settings.host,
        port=settings.port,
        threads=settings.threads,
        threads_batch=settings.threads_batch,
        context=settings.context,
        prompt_cache_mb=settings.prompt_cache_mb,
        start_timeout_s=settings.start_timeout_s,
        log_file=Path(settings.log_file).expanduser() if settings.log_file else None,
        extra_args=list(settings.extra_args),
        command=command,
    )


def check_endpoint(url: str, model: str, api_key_env: str, role: str) -> None:
    """ServerError unless `url` answers /models listing `model`."""
    try:
        listed = served_models(url, timeout_s=10.0, api_key=os.environ.get(api_key_env, "") if api_key_env else "")
    except ServerError as error:
        raise ServerError(
            f"the {role} endpoint does not work: {error}; start it, fix the LLM profile's endpoint "
            "section, or set its check: false"
        ) from error
    if listed is None:
        raise ServerError(
            f"nothing answers at the {role} endpoint {url}: start your server there (e.g. vLLM), fix the LLM "
            "profile's endpoint section, or use --llm embedded / --llm none"
        )
    if model not in listed:
        raise ServerError(f"the {role} endpoint {url} serves {listed}, not {model!r}: fix the LLM profile's model name")


@contextlib.contextmanager
def model_service(profile: LLMProfile, say: Callable[[str], None] = _stderr) -> Iterator[ModelService]:
    """The running model service for a profile; an embedded server started here stops on exit."""
    if profile.llm == "none":
        yield ModelService("none")
        return
    if profile.llm == "endpoint":
        e = profile.endpoint
        if e.check:
            check_endpoint(e.memorizer_url, e.memorizer_model, e.api_key_env, "memorizer")
            check_endpoint(e.control_url, e.control_model, e.api_key_env, "control")
        service = ModelService(
            "endpoint",
            e.memorizer_url,
            e.memorizer_model,
            e.control_url,
            e.control_model,
            e.api_key_env,
            e.request_timeout_s,
            params=e.params,
        )
        say(service.describe())
        yield service
        return
    config = server_config(profile.embedded)
    server = LlamaServer(config)
    say(f"language model {config.model} ({config.model_path.name}): llama.cpp server on {server.base_url}")
    with server:
        how = "reused the server already running" if not server.owned else f"server ready in {server.startup_s:.1f} s"
        say(f"{how} (log: {server.log_file})" if server.owned else how)
        url, timeout_s = server.base_url, profile.embedded.request_timeout_s
        params = profile.embedded.params
        yield ModelService("embedded", url, config.model, url, config.model, "", timeout_s, server, params)
