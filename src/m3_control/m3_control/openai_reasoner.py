"""Reasoner over any OpenAI-compatible /v1/chat/completions endpoint (vLLM serving M3-Agent-Control,
llama.cpp serving a small model, or a hosted model).

Uses `requests` (chat_client.py) rather than the `openai` package. Two ways of speaking:
- the reference text grammar (`response_format: none`, prompts/system.txt, whole clips as the
  reference "Searched knowledge" JSON): what M3-Agent-Control was trained on;
- constrained JSON (`response_format: json_schema | json_object`, prompts/system_json.txt): every
  reply must match structured.decision_schema, so it always parses. Meant for small models, with
  `knowledge: compact` (the most relevant memories as short lines, names instead of ids) and
  `prefetch` (the first searches chosen without the model: a small model's first query is the
  question anyway, and each reply it does not have to write saves seconds on a CPU).
Replies that break the grammar are re-asked `reasks` times with the reason, then MODEL_ERROR.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import requests

from m3_control.chat_client import ChatClient, ChatSettings, StopCheck
from m3_control.extractive_reasoner import EXTRACTIVE_SEARCH, ExtractiveReasoner
from m3_control.knowledge import KNOWLEDGE_STYLES, compact_knowledge
from m3_control.loop import knowledge_message
from m3_control.memory_client import Clip, Memory
from m3_control.reasoner import MODEL_ERROR, Answer, LoopState, ReasonerError, Search
from m3_control.reply_parser import MalformedReply
from m3_control.skills import Skill, is_question
from m3_control.structured import (
    decision_json,
    decision_schema,
    parse_any,
    parse_json_reply,
    response_format,
)
from m3_memory.memorize.json_reply import RESPONSE_FORMATS

PROMPT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")
DEFAULT_SYSTEM_PROMPT = os.path.join(PROMPT_DIR, "system.txt")  # reference text grammar
JSON_SYSTEM_PROMPT = os.path.join(PROMPT_DIR, "system_json.txt")  # constrained JSON, small models
TEXT_REASK = "Reply exactly as 'Action: [Search]' or 'Action: [Answer]' followed by 'Content: ...'."
JSON_REASK = 'Reply with one JSON object: {"action": "search", "query": ...} or {"action": "answer", "answer": ...}.'


def load_prompt(path: str | None, skills_text: str, default: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """A prompt file with {skills} filled in; a missing file is an error naming it."""
    path = path or default
    if not os.path.isfile(path):
        raise FileNotFoundError(f"prompt file not found: {path}")
    with open(path, encoding="utf-8") as handle:
        return handle.read().replace("{skills}", skills_text)


def default_prompt(response_format_kind: str) -> str:
    """The packaged prompt for a reply format: JSON for constrained replies, the text grammar otherwise."""
    return DEFAULT_SYSTEM_PROMPT if response_format_kind == "none" else JSON_SYSTEM_PROMPT


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
    stream: bool = True  # streamed replies: a cancel stops the server's generation too
    response_format: str = "none"  # json_schema | json_object | none (structured.py)
    knowledge: str = "reference"  # reference (whole clips, JSON) | compact (knowledge.py)
    knowledge_limit: int = 8  # compact: new memories shown per search
    prefetch: int = 0  # searches made before the model is first asked (0: the model chooses every query)

    def chat_settings(self) -> ChatSettings:
        return ChatSettings(
            endpoint=self.endpoint,
            model=self.model,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            timeout_s=self.timeout_s,
            retries=self.retries,
            api_key=self.api_key,
            backoff_s=self.backoff_s,
            stream=self.stream,
        )

    def check(self) -> None:
        """ValueError for a setting outside its choices (the node stops at start-up naming it)."""
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format {self.response_format!r}: choose one of {list(RESPONSE_FORMATS)}")
        if self.knowledge not in KNOWLEDGE_STYLES:
            raise ValueError(f"knowledge {self.knowledge!r}: choose one of {list(KNOWLEDGE_STYLES)}")


class OpenAIReasoner:
    """Reasoner speaking the OpenAI chat-completions protocol."""

    def __init__(
        self,
        config: OpenAIConfig,
        session: requests.Session | None = None,
        skills: dict[str, Skill] | None = None,
    ) -> None:
        """skills: the vocabulary the JSON schema allows in plan steps."""
        config.check()
        self.config = config
        self.client = ChatClient(config.chat_settings(), session)
        self.url = self.client.url
        self.skills = skills or {}
        self._queries = ExtractiveReasoner()  # its search plan: the question, the people named, key words
        self.structured = config.response_format != "none"
        if self.structured:
            self.last_round_note = 'This is the last round: answer now ({"action": "answer"}).'

    @property
    def calls(self) -> int:
        return self.client.calls  # HTTP requests made, for tests and benchmarks

    def complete(
        self, messages: list[dict], response_format: dict | None = None, should_stop: StopCheck | None = None
    ) -> str:
        """One chat completion's text; ReasonerError after bounded retries."""
        return self.client.complete(messages, response_format, should_stop)

    def knowledge_message(self, clips: list[Clip], nodes: list[Memory], state: LoopState) -> str:
        """The knowledge turn: the reference JSON of whole clips, or compact lines (knowledge.py)."""
        if self.config.knowledge == "compact":
            return compact_knowledge(clips, nodes, state, self.config.knowledge_limit)
        return knowledge_message(clips, nodes)

    def _prefetched(self, state: LoopState) -> Search | None:
        """The next search of the back-end's own plan, while the prefetch rounds last."""
        if state.round > self.config.prefetch or state.must_answer:
            return None
        done = {q.lower() for q in state.queries}
        for query in self._queries.queries(state.instruction, state.evidence):
            if query.lower() not in done and not query.startswith("<"):
                search = self._search(query)
                raw = decision_json(search) if self.structured else ""
                return Search(search.query, raw, search.top_k, search.threshold, search.node_top_k)
        return None

    def _search(self, query: str) -> Search:
        """Compact knowledge ranks single memories itself, so it can take the wider searches."""
        if self.config.knowledge == "compact":
            return Search(query=query, **EXTRACTIVE_SEARCH)
        return Search(query=query)

    @staticmethod
    def asks_plan(state: LoopState) -> bool:
        """A command's reply carries a plan, except the re-ask for the text of an answer whose plan stands."""
        return not is_question(state.instruction) and state.reask != "text"

    def decide(self, state: LoopState) -> Search | Answer:
        prefetched = self._prefetched(state)
        if prefetched is not None:
            return prefetched
        if not self.structured:
            reply = decide_by_chat(
                lambda messages: self.complete(messages, should_stop=state.should_stop),
                state,
                self.config.reasks,
            )
        else:
            schema = decision_schema(self.skills, self.asks_plan(state), state.answer_only)
            fmt = response_format(self.config.response_format, schema)
            reply = decide_by_chat(
                lambda messages: self.complete(messages, fmt, state.should_stop),
                state,
                self.config.reasks,
                parse_json_reply,
                JSON_REASK,
            )
        if isinstance(reply, Search) and self.config.knowledge == "compact":
            wide = self._search(reply.query)
            return Search(reply.query, reply.raw, wide.top_k, wide.threshold, wide.node_top_k)
        return reply


def decide_by_chat(
    complete: Callable[[list[dict]], str],
    state: LoopState,
    reasks: int,
    parse: Callable[[str], Search | Answer] = parse_any,
    reask_text: str = TEXT_REASK,
) -> Search | Answer:
    """Ask a chat model for the round's decision; re-ask `reasks` times on a malformed reply.

    The malformed exchanges stay in the transcript (state.messages), so what the model saw is kept.
    """
    problem = ""
    for _ in range(reasks + 1):
        reply = complete(state.messages)
        try:
            return parse(reply)
        except MalformedReply as error:
            problem = str(error)
            state.messages.append({"role": "assistant", "content": reply})
            state.messages.append({"role": "user", "content": f"Your reply could not be read: {problem}. {reask_text}"})
    raise ReasonerError(MODEL_ERROR, f"unusable replies after {reasks + 1} attempt(s): {problem}")
