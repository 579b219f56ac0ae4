"""HTTP client of an OpenAI-compatible /v1/chat/completions endpoint, with bounded retries and cancellation.

Why a worker thread and streaming: a goal may be canceled while the model is still writing. The
request runs in a daemon thread while the caller waits in short polls, asking `should_stop`; on a
stop the caller returns at once (ReasonerStopped) and the worker closes the streamed response at
its next chunk, which is how llama.cpp (both servers) and vLLM learn that the client has gone and
stop generating. Without streaming (`stream: false`) the caller still returns at once, but the
server finishes the reply it started.

Transport failures (connection refused, timeouts, HTTP 429/5xx) are retried `retries` times, then
MODEL_UNREACHABLE; other HTTP errors and bodies outside the protocol are MODEL_ERROR.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import requests

from m3_control.reasoner import MODEL_ERROR, MODEL_UNREACHABLE, ReasonerError

StopCheck = Callable[[], "str | None"]


class ReasonerStopped(ReasonerError):
    """The goal was canceled or preempted while a reply was in flight; `code` is CANCELED / PREEMPTED."""


@dataclass
class ChatSettings:
    endpoint: str = "http://localhost:8000/v1"
    model: str = "M3-Agent-Control"
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 1024
    timeout_s: float = 60.0  # per reply, from sending the request to its last token
    retries: int = 2
    api_key: str = ""
    backoff_s: float = 0.5
    stream: bool = True
    poll_s: float = 0.05  # how often a waiting caller checks for a stop


class _Failure(Exception):
    """A worker's outcome that is not a reply: (retryable, message)."""

    def __init__(self, retryable: bool, message: str) -> None:
        super().__init__(message)
        self.retryable = retryable


def _stream_text(response: requests.Response, abandon: threading.Event) -> str | None:
    """The content of a server-sent-events reply; None when abandoned (the response is then closed).
    A stream that ends before a chunk gives its finish_reason was cut short by the server (llama-cpp-
    python's server ends one when another request arrives, unless started with --interrupt_requests
    false): a retryable failure, not a reply to parse."""
    parts: list[str] = []
    finished = False
    for line in response.iter_lines():
        if abandon.is_set():
            return None
        if not line or not line.startswith(b"data:"):
            continue  # blank separators, ": ping" comments
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        try:
            choice = json.loads(data)["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise _Failure(False, "streamed a chunk outside the chat-completions protocol") from error
        if not choice:
            continue
        parts.append((choice.get("delta") or {}).get("content") or "")
        finished = finished or bool(choice.get("finish_reason"))
    if not finished:
        raise _Failure(True, "the server ended the streamed reply before it finished (no finish_reason)")
    return "".join(parts)


class ChatClient:
    """Sends chat requests; one reply at a time per caller, any number of callers."""

    def __init__(self, settings: ChatSettings, session: requests.Session | None = None) -> None:
        self.settings = settings
        self.session = session or requests.Session()
        base = settings.endpoint.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.calls = 0  # HTTP requests made, for tests and benchmarks

    def body(self, messages: list[dict], response_format: dict | None = None) -> dict:
        s = self.settings
        body = {
            "model": s.model,
            "messages": messages,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if response_format is not None:
            body["response_format"] = response_format
        if s.stream:
            body["stream"] = True
        return body

    def _work(self, body: dict, out: queue.Queue, abandon: threading.Event) -> None:
        """One request in the worker thread; puts the text or a _Failure on out."""
        s = self.settings
        headers = {"Authorization": f"Bearer {s.api_key}"} if s.api_key else {}
        try:
            with self.session.post(
                self.url, json=body, headers=headers, timeout=s.timeout_s, stream=bool(body.get("stream"))
            ) as response:
                if response.status_code == 429 or response.status_code >= 500:
                    raise _Failure(True, f"{self.url} answered HTTP {response.status_code}: {response.text[:200]}")
                if response.status_code != 200:
                    raise _Failure(
                        False, f"{self.url} refused the request: HTTP {response.status_code}: {response.text[:300]}"
                    )
                if "text/event-stream" in response.headers.get("Content-Type", ""):
                    out.put(_stream_text(response, abandon))
                    return
                try:
                    choice = response.json()["choices"][0]["message"]
                except (ValueError, KeyError, IndexError, TypeError) as error:
                    raise _Failure(False, f"{self.url} replied outside the chat-completions protocol") from error
                out.put(choice.get("content") or "")
        except _Failure as failure:
            out.put(failure)
        except requests.Timeout:
            out.put(_Failure(True, f"no reply from {self.url} within {s.timeout_s} s"))
        except requests.RequestException as error:
            out.put(_Failure(True, f"cannot reach {self.url}: {error.__class__.__name__}: {error}"))

    def _attempt(self, body: dict, should_stop: StopCheck | None) -> str:
        """One request; the caller polls for a stop and for the reply deadline while the worker waits."""
        out: queue.Queue = queue.Queue()
        abandon = threading.Event()
        worker = threading.Thread(target=self._work, args=(body, out, abandon), daemon=True, name="m3-chat")
        worker.start()
        deadline = time.monotonic() + self.settings.timeout_s
        while True:
            try:
                outcome = out.get(timeout=self.settings.poll_s)
            except queue.Empty:
                code = should_stop() if should_stop else None
                if code:
                    abandon.set()
                    raise ReasonerStopped(code, f"goal {code.lower()} while the model was replying") from None
                if time.monotonic() > deadline:
                    abandon.set()
                    raise _Failure(True, f"no reply from {self.url} within {self.settings.timeout_s} s") from None
                continue
            if isinstance(outcome, _Failure):
                raise outcome
            return outcome or ""

    def complete(
        self, messages: list[dict], response_format: dict | None = None, should_stop: StopCheck | None = None
    ) -> str:
        """One chat reply's text; ReasonerError after bounded retries, ReasonerStopped on a stop."""
        body = self.body(messages, response_format)
        last_error = ""
        for attempt in range(self.settings.retries + 1):
            if attempt:
                time.sleep(self.settings.backoff_s * attempt)
            self.calls += 1
            try:
                return self._attempt(body, should_stop)
            except _Failure as failure:
                if not failure.retryable:
                    raise ReasonerError(MODEL_ERROR, str(failure)) from None
                last_error = str(failure)
        raise ReasonerError(MODEL_UNREACHABLE, f"{last_error} (after {self.settings.retries + 1} attempt(s))")
