"""When a model reasoner does not know, ask the rules.

A model's answer that says it does not know (in its own words, or as the answer checks' "I don't know: ..."),
or that does not hold what a where / when / how-many question asks for (no place, time or number: "Where were
you when Bob said it?" answered "Bob said he has a dog"), is replaced by the extractive reasoner's answer to
the same goal over the same memory, when the rules find one that does. Why: a small model says "I don't know",
or repeats the fact asked about, where memory holds the answer in a shape the rules read (the room a line was
said in, a person's own role, the reply to a question), so a model path could score below `--llm none` on the
very questions the rules answer.

An answer that says nothing but a person's name to a question that asks for no person ("Bob." to "What does
the person who drinks black coffee take pictures of?") also leaves it open: a small model answers *who*
where *what* is asked, and a name is no thing, place or time.

A where / when / how-many answer, or one to a plain "what" question (of no kind answer_kinds reads: no person,
relation, role or writing), is also replaced when the rules are certain and the model says otherwise: the
rules' best memory holds every content word of the question (and, for where / when / how-many, the kind of
thing asked: a time for "when"), and the model's answer has a word that memory lacks
("When is the fire drill?" answered "On Tuesday" beside "The fire drill is at 11 today."; "What did Lucia
bring from her village?" answered "rice crackers" beside "I brought you a jar of fig jam from our village.").
Why: a small model mixes two facts of one clip (the football match was on Tuesday; the crackers she also
brought), where a memory that states the asked fact whole is the answer; on a memory that only partly
matches the question, or a question of another kind (a person's or a role's words are met by any line of
that person: "What is Leila's job?" by her question about a meeting), the model's reading stands. Otherwise
a model's answer is never overridden (a wrong guess of the right kind, with no certain memory against it,
stays a wrong guess), a plan is never replaced, and an answer the rules gave says so
(`LoopResult.answered_by`, Instruct's `answered_by`). The control node's `rules_when_unsure` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from m3_control.answer_kinds import answer_kind, holds_kind
from m3_control.extractive_reasoner import ExtractiveReasoner, content_words, question_words
from m3_control.loop import SUCCEEDED, LoopResult
from m3_control.names import names_from

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
    """Whether an answer leaves the question open: it abstains, says nothing but the question's own words
    (restates), or a where / when / how-many question gets no place, time or number."""
    kind = answer_kind(question)
    return (
        abstains(answer) or restates(question, answer) or (kind in CRISP_KINDS and not holds_kind(answer, kind, set()))
    )


def restates(question: str, answer: str) -> bool:
    """Whether every content word of the answer is one of the question's ("The patient with the sore knee is a
    patient." to "What is the job of the patient with the sore knee?", "On Saturday." to "Where does Rosa work
    on Saturday?"). Why: a small model hands the question back as its answer, which says nothing; "Yes." and a
    name or a number the question lacks are words of their own."""
    return not content_words(answer) - content_words(question)


# A question that may ask for a person in other words than answer_kind reads: "Which guest came late?",
# "What is the nurse called?", "Tell me who cooked." (an interrogative "who" after a verb; the relative one
# of "the person who drinks coffee" names no asked person).
MAY_ASK_PERSON_RE = re.compile(
    r"\b(?:which|name|named|called)\b"
    r"|(?:^|\b(?:me|us|know|knows|remember|ask|say|tell|guess|wonder|out|see)\s+)(?:who|whom|whose)\b",
    re.IGNORECASE,
)


def names_only(question: str, answer: str, names: Iterable[str]) -> bool:
    """Whether an answer to a question that asks for no person says nothing beyond the question's words but
    names of people memory knows ("Nadia checked first." to "What did the nurse check first?")."""
    if answer_kind(question) == "person" or MAY_ASK_PERSON_RE.search(question.strip()):
        return False
    said = content_words(answer) - question_words(question)
    return bool(said) and said <= {word for name in names for word in content_words(name)}


def checked_kind(question: str) -> bool:
    """Whether the rules may overrule a model's answer to this question when certain (contradicted): a where /
    when / how-many question, or a plain "what" one that may not ask for a person (MAY_ASK_PERSON_RE)."""
    kind = answer_kind(question)
    return kind in CRISP_KINDS or (kind == "" and not MAY_ASK_PERSON_RE.search(question.strip()))


def known_names(outcome: LoopResult) -> set[str]:
    """The names of people the outcome's loop learnt or its evidence holds."""
    if outcome.state is None:
        return set()
    return set(outcome.state.names.values()) | set(names_from(outcome.state.evidence).values())


def contradicted(question: str, answer: str, rules: LoopResult) -> bool:
    """Whether the rules are certain of a where / when / how-many or plain "what" answer (checked_kind) that
    the model's answer leaves: their best memory covers every content word of the question exactly (and holds
    the kind asked, for where / when / how-many), and the model's answer says a word (beyond the question's)
    that memory does not."""
    kind = answer_kind(question)
    if not checked_kind(question) or rules.state is None:
        return False
    ranked = ExtractiveReasoner().ranked_scores(rules.state)
    if not ranked or ranked[0].coverage < 1.0 or (kind in CRISP_KINDS and not ranked[0].kind):
        return False
    said = content_words(answer) - question_words(question)
    return bool(said - content_words(ranked[0].text))


def ask_rules_when_unsure(question: str, outcome: LoopResult, ask_rules: Callable[[], LoopResult]) -> LoopResult:
    """outcome, or the rules' outcome (ask_rules: the same goal with the extractive reasoner) when the model's
    answer, without a plan, left the question open (or gave only a name where no person is asked for: names_only)
    and the rules' answer does not, or when the rules are certain of a where / when / how-many or plain "what"
    answer and the model's says otherwise (contradicted)."""
    if outcome.code != SUCCEEDED or outcome.plan:
        return outcome
    unsure = unanswered(question, outcome.answer) or names_only(question, outcome.answer, known_names(outcome))
    if not unsure and not checked_kind(question):
        return outcome
    rules = ask_rules()
    if rules.code != SUCCEEDED or unanswered(question, rules.answer):
        return outcome
    if not unsure and not contradicted(question, outcome.answer, rules):
        return outcome
    rules.answered_by = RULES
    rules.rounds_used += outcome.rounds_used
    rules.timings_ms = outcome.timings_ms + rules.timings_ms
    why = "did not know" if unsure else "said otherwise than a memory that answers the whole question"
    note = {"role": "user", "content": f"(The model {why}; the rules answered: {rules.answer})"}
    rules.transcript = [*outcome.transcript, note]
    return rules
