"""When a model reasoner does not know, ask the rules.

A model's answer that says it does not know (in its own words, or as the answer checks' "I don't know: ..."),
or that does not hold what a where / when / how-many question asks for (no place, time or number: "Where were
you when Bob said it?" answered "Bob said he has a dog"), is replaced by the extractive reasoner's answer to
the same goal over the same memory, when the rules find one that does. Why: a small model says "I don't know",
or repeats the fact asked about, where memory holds the answer in a shape the rules read (the room a line was
said in, a person's own role, the reply to a question), so a model path could score below `--llm none` on the
very questions the rules answer. A model's answer is never overridden otherwise (a wrong guess of the right
kind stays a wrong guess), a plan is never replaced, and an answer the rules gave says so
(`LoopResult.answered_by`, Instruct's `answered_by`). The control node's `rules_when_unsure` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from m3_control.answer_kinds import answer_kind, holds_kind
from m3_control.loop import SUCCEEDED, LoopResult

RULES = "extractive"  # answered_by of an answer the rules gave
CRISP_KINDS = ("place", "time", "number")  # kinds an answer visibly holds or lacks (answer_kinds.holds_kind)
# An answer that only says memory does not tell: "I don't know", "I do not know where ...", "I'm not sure",
# "There is no information about ...", "Nothing in my memory says ...", "Unknown."
ABSTAIN_RE = re.compile(
    r"^\W*(i\s+(do\s*n[o']?t|cannot|can't|could\s*n[o']?t)\s+(know|tell|say|determine|find|recall)"
    r"|i\s*('m|\s+am)\s+not\s+sure|(unknown|not\s+known)\W*$"
    r"|there\s+is\s+no\s+(information|mention|record|evidence)|no\s+(information|record|mention|evidence)\b"
    r"|(my\s+)?memory\s+(holds|has|contains|says)\s+nothing|nothing\s+in\s+my\s+memory)",
    re.IGNORECASE,
)


def abstains(answer: str) -> bool:
    """Whether an answer only says that memory does not tell."""
    return bool(ABSTAIN_RE.match(answer.strip()))


def unanswered(question: str, answer: str) -> bool:
    """Whether an answer leaves the question open: it abstains, or a where / when / how-many question gets no
    place, time or number."""
    kind = answer_kind(question)
    return abstains(answer) or (kind in CRISP_KINDS and not holds_kind(answer, kind, set()))


def ask_rules_when_unsure(question: str, outcome: LoopResult, ask_rules: Callable[[], LoopResult]) -> LoopResult:
    """outcome, or the rules' outcome (ask_rules: the same goal with the extractive reasoner) when the model's
    answer, without a plan, left the question open and the rules' answer does not."""
    if outcome.code != SUCCEEDED or outcome.plan or not unanswered(question, outcome.answer):
        return outcome
    rules = ask_rules()
    if rules.code != SUCCEEDED or unanswered(question, rules.answer):
        return outcome
    rules.answered_by = RULES
    rules.rounds_used += outcome.rounds_used
    rules.timings_ms = outcome.timings_ms + rules.timings_ms
    note = {"role": "user", "content": f"(The model did not know; the rules answered: {rules.answer})"}
    rules.transcript = [*outcome.transcript, note]
    return rules
