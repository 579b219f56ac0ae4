"""When a model reasoner does not know, ask the rules.

A model's answer that says it does not know (in its own words, or as the answer checks' "I don't know: ...")
is replaced by the extractive reasoner's answer to the same goal over the same memory, when the rules find
one. Why: a small model says "I don't know" where memory holds the answer in a shape the rules read (the
room a line was said in, a person's own role, the reply to a question), so a model path could score below
`--llm none` on the very questions the rules answer. A model's answer is never overridden otherwise (a wrong
guess stays a wrong guess), a plan is never replaced, and an answer the rules gave says so
(`LoopResult.answered_by`, Instruct's `answered_by`). The control node's `rules_when_unsure` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from m3_control.loop import SUCCEEDED, LoopResult

RULES = "extractive"  # answered_by of an answer the rules gave
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


def ask_rules_when_unsure(outcome: LoopResult, ask_rules: Callable[[], LoopResult]) -> LoopResult:
    """outcome, or the rules' outcome (ask_rules: the same goal with the extractive reasoner) when the model
    answered that it does not know, without a plan, and the rules answer something else."""
    if outcome.code != SUCCEEDED or outcome.plan or not abstains(outcome.answer):
        return outcome
    rules = ask_rules()
    if rules.code != SUCCEEDED or abstains(rules.answer):
        return outcome
    rules.answered_by = RULES
    rules.rounds_used += outcome.rounds_used
    rules.timings_ms = outcome.timings_ms + rules.timings_ms
    note = {"role": "user", "content": f"(The model did not know; the rules answered: {rules.answer})"}
    rules.transcript = [*outcome.transcript, note]
    return rules
