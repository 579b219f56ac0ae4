"""Reasoner over any OpenAI-compatible /v1/chat/completions endpoint (vLLM serving M3-Agent-Control, or a hosted model).

Uses `requests` (installed with the suite) rather than the `openai` package. Transport failures
(connection refused, timeouts, HTTP 429/5xx) are retried `retries` times, then MODEL_UNREACHABLE;
replies that break the grammar are re-asked `reasks` times with the reason, then MODEL_ERROR.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from m3_control.reasoner import MODEL_ERROR, MODEL_UNREACHABLE, Answer, LoopState, ReasonerError, Search
from m3_control.reply_parser import MalformedReply, parse_reply

PROMPT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")
DEFAULT_SYSTEM_PROMPT = os.path.join(PROMPT_DIR, "system.txt")


def load_prompt(path: str | None, skills_text: str) -> str:
    """A prompt file with {skills} filled in; a missing file is an error naming it."""
    path = path or DEFAULT_SYSTEM_PROMPT
    if not os.path.isfile(path):
        raise FileNotFoundError(f"prompt file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        return handle.read().replace("{skills}", skills_text)


@dataclass
class OpenAIConfig:
    endpoint: str = "http://localhost:8000/v1"  # base URL; /chat/completions is appended
    model: str = "M3-Agent-Control"
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 1024
    timeout_s: float = 60.0
    retries: int = 2  # transport retries after the first attempt
    reasks: int = 2  # re-asks after a malformed reply
    api_key: str = ""  # sent as a Bearer token when set
    backoff_s: float = 0.5


class OpenAIReasoner:
    """Reasoner speaking the OpenAI chat-completions protocol."""

    def __init__(self, config: OpenAIConfig, session: requests.Session | None = None) -> None:
        self.config = config
        self.session = session or requests.Session()
        base = config.endpoint.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.calls = 0  # HTTP requests made, for tests and benchmarks

    def complete(self, messages: list[dict]) -> str:
        """One chat completion's text; ReasonerError after bounded retries."""
        body = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "top_p": self.config.top_p,
            "max_tokens": self.config.max_tokens,
        }
        headers = {"Authorization": f"Bearer {self.config.api_key}"} if self.config.api_key else {}
        last_error = ""
        for attempt in range(self.config.retries + 1):
            if attempt:
                time.sleep(self.config.backoff_s * attempt)
            self.calls += 1
            try:
                response = self.session.post(self.url, json=body, headers=headers, timeout=self.config.timeout_s)
            except requests.Timeout:
                last_error = f"no reply from {self.url} within {self.config.timeout_s} s"
                continue
            except requests.RequestException as error:
                last_error = f"cannot reach {self.url}: {error.__class__.__name__}: {error}"
                continue
            if response.status_code == 429 or response.status_code >= 500:
                last_error = f"{self.url} answered HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code != 200:
                raise ReasonerError(
                    MODEL_ERROR, f"{self.url} refused the request: HTTP {response.status_code}: {response.text[:300]}"
                )
            try:
                choice = response.json()["choices"][0]["message"]
            except (ValueError, KeyError, IndexError, TypeError) as error:
                raise ReasonerError(MODEL_ERROR, f"{self.url} replied outside the chat-completions protocol") from error
            content = choice.get("content") or ""
            return content
        raise ReasonerError(MODEL_UNREACHABLE, f"{last_error} (after {self.config.retries + 1} attempt(s))")

    def decide(self, state: LoopState) -> Search | Answer:
        return decide_by_chat(self.complete, state, self.config.reasks)


def decide_by_chat(complete: Callable[[list[dict]], str], state: LoopState, reasks: int) -> Search | Answer:
    """Ask a chat model for the round's decision; re-ask `reasks` times on a malformed reply.

    The malformed exchanges stay in the transcript (state.messages), so what the model saw is kept.
    """
    problem = ""
    for _ in range(reasks + 1):
        reply = complete(state.messages)
        try:
            return parse_reply(reply)
        except MalformedReply as error:
            problem = str(error)
            state.messages.append({"role": "assistant", "content": reply})
            state.messages.append(
                {
                    "role": "user",
                    "content": f"Your reply could not be read: {problem}. Reply exactly as "
                    "'Action: [Search]' or 'Action: [Answer]' followed by 'Content: ...'.",
                }
            )
    raise ReasonerError(MODEL_ERROR, f"unusable replies after {reasks + 1} attempt(s): {problem}")
