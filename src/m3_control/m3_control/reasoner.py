"""The reasoner interface: each round it reads the conversation so far and decides to Search or Answer.

Back-ends (openai_reasoner, extractive_reasoner, vllm_reasoner) implement `decide`; the loop does
the memory calls, bookkeeping and safety checks, so a back-end never talks to memory itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from m3_control.memory_client import Memory
from m3_control.relative_times import without_phrase

MODEL_UNREACHABLE = "MODEL_UNREACHABLE"
MODEL_ERROR = "MODEL_ERROR"


class ReasonerError(RuntimeError):
    """The reasoner failed; `code` is MODEL_UNREACHABLE or MODEL_ERROR (Instruct.Result constants)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Search:
    query: str
    raw: str = ""  # the model's reply as it was (reasoning stripped), kept for the transcript
    # Search parameters a back-end may choose for itself; None / 0 = the loop's (reference) settings.
    top_k: int | None = None  # clips per search_clip
    threshold: float | None = None  # minimum clip score for search_clip
    node_top_k: int = 0  # > 0: search_node as well, for this many nodes (id queries always search nodes)


@dataclass(frozen=True)
class Answer:
    text: str
    plan: tuple = ()  # raw step dicts ({"skill", "target", "arguments"}); validated by the loop
    evidence_ids: tuple[str, ...] = ()  # empty: the loop picks the supporting memories
    raw: str = ""


@dataclass
class LoopState:
    """What a reasoner may read: the instruction, the chat transcript and the evidence gathered so far."""

    instruction: str
    round: int  # from 1
    max_rounds: int
    messages: list[dict] = field(default_factory=list)  # OpenAI chat format, system prompt first
    evidence: list[Memory] = field(default_factory=list)  # every memory retrieved so far, deduplicated
    queries: list[str] = field(default_factory=list)  # queries already sent
    last_hits: int = 0  # memories retrieved in the previous round
    feedback: str = ""  # loop's complaint about the previous reply (malformed, bad plan), to re-ask
    # CANCELED / PREEMPTED when the goal must stop, else None: a back-end may poll it while a reply is in flight
    should_stop: Callable[[], str | None] | None = None
    shown: set[str] = field(default_factory=set)  # memory ids a back-end has already shown its model
    names: dict[str, str] = field(default_factory=dict)  # entity id -> name memory knows (the loop learns them)
    unnamed: set[str] = field(default_factory=set)  # ids looked up that memory knows no name for
    people: dict[str, str] | None = None  # every named person of memory (looked up at the first search)
    spellings: dict[str, str] = field(default_factory=dict)  # memory's spelling -> the instruction's (names)
    time_phrase: str = ""  # the instruction's relative time that every search's time window stands for
    # why the previous answer was sent back: "plan" (rejected) or "text" (it does not name what its valid
    # plan picks, or names a person the evidence does not: the plan is kept and only the text is asked
    # for again); "" when it was not
    reask: str = ""

    @property
    def asked(self) -> str:
        """What the instruction asks, without the time phrase the searches keep to ("this morning"): its
        words are not what a memory from then says."""
        return without_phrase(self.instruction, self.time_phrase)

    @property
    def must_answer(self) -> bool:
        return self.round >= self.max_rounds

    @property
    def answer_only(self) -> bool:
        """Whether a reply must be an answer: the last round, or a re-ask after an answer sent back."""
        return self.must_answer or bool(self.reask)


class Reasoner(Protocol):
    def decide(self, state: LoopState) -> Search | Answer:
        """Search or Answer for this round; raise ReasonerError when the back-end fails."""
        ...
