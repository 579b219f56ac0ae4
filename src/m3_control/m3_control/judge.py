"""`m3 judge`: does the ground truth follow from the agent's answer? (the reference's GPT-4o judge, Yes/No)

With --endpoint, any OpenAI-compatible chat model judges with the reference's question. Without
one there is no language model here, so the fallback is a normalised exact/number match, labelled
"method": "normalised-match" in every output line: it is stricter than a model judge.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterable

from m3_control.openai_reasoner import OpenAIConfig, OpenAIReasoner
from m3_control.reasoner import ReasonerError
from m3_control.reply_parser import strip_reasoning

JUDGE_PROMPT = (
    "You are provided with a question, a ground truth answer, and an answer from an agent model. Your task is to "
    "determine whether the ground truth answer can be logically inferred from the agent's answer, in the context of "
    "the question. Do not directly compare the surface forms of the agent answer and the ground truth answer. "
    "Instead, assess whether the meaning expressed by the agent answer supports or implies the ground truth answer. "
    'If the ground truth can be reasonably derived from the agent answer, return "Yes". If it cannot, return "No".\n'
    'Output only "Yes" or "No", with no additional explanation.\n\n'
    "Question: {question}\nGround Truth Answer: {truth}\nAgent Answer: {answer}"
)
UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen".split()
    )
}
TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
# Ordinal words as the cardinal word they count with ("twelfth" -> "twelve"), so _cardinals reads them as
# numbers: a truth says "the twelfth" where speech recognition writes "the 12th" ("twenty first": 21).
IRREGULAR = "first one second two third three fifth five eighth eight ninth nine twelfth twelve".split()
ORDINALS = {
    **dict(zip(IRREGULAR[::2], IRREGULAR[1::2], strict=True)),
    **{w + "th": w for w in UNITS if UNITS[w] > 3 and w not in IRREGULAR[1::2]},  # "fourth", "sixteenth"
    **{w[:-1] + "ieth": w for w in TENS},  # "twentieth"
}
DIGIT_ORDINAL_RE = re.compile(r"^(\d+)(?:st|nd|rd|th)$")  # "1st", "22nd", "12th"
# British "-our" as American "-or" ("harbour" / "harbor", "colours" / "colors", "favourite"): a truth is
# written one way, speech recognition writes the other, and to a reader they are one word. Both sides are
# folded, so a word that only looks like one ("detour") is folded alike on both.
OUR_RE = re.compile(r"(?<=[a-z]{3})our(?=(?:s|ed|ing|ite|ites|able|ful)?$)")


def _number_word(w: str) -> tuple[int, str] | None:
    """(value, "unit" | "tens") of a number word below a hundred; None for any other word."""
    if w in TENS:
        return TENS[w], "tens"
    return (UNITS[w], "unit") if w in UNITS else None


def _cardinals(words: list[str]) -> list[str]:
    """Number words as digits: a truth says "twenty five euros" or "forty" where speech recognition
    writes "25 euros" and "40", and they say the same to a reader (and to the reference's model
    judge). Tens and a unit join ("twenty five", "twenty-five": 25), "hundred" multiplies (with an
    optional "and": "one hundred and five": 105); a unit before tens stays two numbers ("five thirty",
    a time). Small on purpose: cardinals up to 999 are all these answers hold."""
    out: list[str] = []
    value: int | None = None  # the number being read
    last = ""  # what its last word was: "unit", "tens", "hundred"
    for i, w in enumerate(words):
        follows = i + 1 < len(words) and _number_word(words[i + 1]) is not None
        number = _number_word(w)
        if value is not None and w == "and" and last == "hundred" and follows:
            continue
        if value is not None and w == "hundred" and last in ("unit", "tens"):
            value, last = value * 100, "hundred"
        elif value is not None and w in UNITS and 0 < UNITS[w] < 10 and last == "tens":
            value, last = value + UNITS[w], "unit"
        elif value is not None and last == "hundred" and number is not None:
            value, last = value + number[0], number[1]
        else:
            if value is not None:
                out.append(str(value))
                value = None
            if number is not None:
                value, last = number
            else:
                out.append(w)
    if value is not None:
        out.append(str(value))
    return out


def _spelled(word: str) -> str:
    """One word as the normaliser compares it: an ordinal as its cardinal, British "-our" as "-or"."""
    digits = DIGIT_ORDINAL_RE.match(word)
    if digits:
        return digits.group(1)
    return ORDINALS.get(word) or OUR_RE.sub("or", word)


def normalise(text: str) -> str:
    words = [w.strip(".") for w in re.findall(r"[a-z0-9.]+", text.lower())]  # a sentence's last word too
    return " ".join(_cardinals([_spelled(w) for w in words if w and w not in ("a", "an", "the")]))


# A truth that opens with the pronoun "one" ("the one in the kitchen", to "Which printer should be
# used?") stands for the question's noun: an answer that names it ("The printer in the kitchen.") says
# the same to a reader, and to the reference's model judge; what follows the pronoun must be there.
PRO_FORM_RE = re.compile(r"^\s*the\s+ones?\s+(?=\S)", re.I)


def match(truth: str, answer: str) -> bool:
    """Normalised truth contained in the normalised answer; for numeric truths, the same numbers."""
    t, a = normalise(PRO_FORM_RE.sub("", truth)), normalise(answer)
    if not t:
        return False
    numbers = re.findall(r"\d+(?:\.\d+)?", t)
    if numbers and len(numbers) == len(t.split()):
        return all(n in re.findall(r"\d+(?:\.\d+)?", a) for n in numbers)
    # As written, then with plurals folded (folding alone would lose a compound such as "news room").
    return any(_joined("".join(map(fold, t.split())), list(map(fold, a.split()))) for fold in (str, _singular))


def _singular(word: str) -> str:
    """An English plural's singular, roughly ("pies" -> "pie", "boxes" -> "box", "berries" -> "berry"),
    the same on both sides: "pies" answers "pie" to a reader as to the reference's model judge."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith(("ses", "xes", "ches", "shes", "zes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _joined(truth: str, words: list[str]) -> bool:
    """The truth, spaces dropped, spelled by a run of whole answer words: the truth's own words in a
    row, or a compound written apart or together ("note book" / "notebook", "living room" /
    "livingroom"), which mean the same to a reader as to the reference's model judge; a word's prefix
    never counts ("ten" is not in "tent")."""
    for start in range(len(words)):
        spelled = ""
        for word in words[start:]:
            spelled += word
            if spelled == truth:
                return True
            if not truth.startswith(spelled):
                break
    return False


class ModelJudge:
    def __init__(self, config: OpenAIConfig) -> None:
        self.reasoner = OpenAIReasoner(config)

    def __call__(self, question: str, truth: str, answer: str) -> bool:
        prompt = JUDGE_PROMPT.format(question=question, truth=truth, answer=answer)
        for _ in range(self.reasoner.config.reasks + 1):
            reply = strip_reasoning(self.reasoner.complete([{"role": "user", "content": prompt}])).strip().lower()
            if reply.startswith("yes"):
                return True
            if reply.startswith("no"):
                return False
        raise ReasonerError("MODEL_ERROR", f"judge replied neither Yes nor No: {reply[:80]!r}")


def truth_variants(truth: str, spellings: Iterable[Iterable[str]]) -> list[str]:
    """The truth as written, and with each name of it in every other spelling of that name (spellings:
    groups of one person's name, e.g. {"Sofia", "Sophia"}; whole words, any case)."""
    variants = [truth]
    for group in spellings:
        names = sorted({str(n).strip() for n in group if str(n).strip()}, key=len, reverse=True)
        said = next((n for n in names if re.search(rf"\b{re.escape(n)}\b", truth, re.IGNORECASE)), None)
        if said is None:
            continue
        pattern = re.compile(rf"\b{re.escape(said)}\b", re.IGNORECASE)
        variants += [pattern.sub(other, v) for v in variants for other in names if other != said]
    return list(dict.fromkeys(variants))


def with_spellings(judge: Callable[[str, str, str], bool], spellings: Iterable[Iterable[str]]):
    """A judge that also takes a name of the truth written another way its episode lists ("Sophia owns
    the bakery." for the truth "Sofia"): speech recognition writes a name as it hears it, and memory
    answers in the spelling it heard; every listed spelling is that name, to a reader as to a model judge."""
    groups = [list(group) for group in spellings]
    if not groups:
        return judge
    variants: dict[str, list[str]] = {}  # per truth: an episode's questions are judged once per run, or again

    def judged(question: str, truth: str, answer: str) -> bool:
        if truth not in variants:
            variants[truth] = truth_variants(truth, groups)
        return any(judge(question, variant, answer) for variant in variants[truth])

    return judged


def make_judge(endpoint: str, model: str, timeout_s: float, api_key_env: str):
    """(judge(question, truth, answer) -> bool, method label): a model judge, or the labelled match."""
    if endpoint:
        config = OpenAIConfig(
            endpoint=endpoint,
            model=model,
            temperature=0.0,
            top_p=1.0,
            max_tokens=16,
            timeout_s=timeout_s,
            api_key=os.environ.get(api_key_env, ""),
        )
        return ModelJudge(config), f"model:{model}"
    return (lambda question, truth, answer: match(truth, answer)), "normalised-match"


def read_items(path: str) -> list[dict]:
    """JSON lines from a file or stdin ('-'); a bad line is a ValueError naming its number."""
    if path == "-":
        lines = sys.stdin.read().splitlines()
    else:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    items = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                item = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"line {number} is not JSON ({error.msg})") from error
            if not isinstance(item, dict):
                raise ValueError(f"line {number} is not a JSON object")
            items.append(item)
    return items


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="m3 judge", description=__doc__.splitlines()[0])
    parser.add_argument("--question", default="", help="the question asked")
    parser.add_argument("--truth", help="the ground-truth answer")
    parser.add_argument("--answer", help="the agent's answer")
    parser.add_argument("--file", help="JSON lines with question, ground_truth (or truth) and answer; '-' = stdin")
    parser.add_argument("--endpoint", default="", help="OpenAI-compatible base URL; empty: normalised match")
    parser.add_argument("--model", default="gpt-4o", help="judge model name (default gpt-4o, as the reference)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable with the API key")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per judge reply")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.file:
        try:
            items = read_items(args.file)
        except (OSError, ValueError) as error:
            print(f"m3 judge: error: {args.file}: {error}", file=sys.stderr)
            return 2
    elif args.truth is not None and args.answer is not None:
        items = [{"question": args.question, "ground_truth": args.truth, "answer": args.answer}]
    else:
        print("m3 judge: error: give --truth and --answer, or --file", file=sys.stderr)
        return 2
    judge, method = make_judge(args.endpoint, args.model, args.timeout, args.api_key_env)
    correct = 0
    for item in items:
        truth = item.get("ground_truth", item.get("truth", ""))
        try:
            verdict = judge(item.get("question", ""), truth, item.get("answer", ""))
        except ReasonerError as error:
            print(f"m3 judge: error: {error.code}: {error}", file=sys.stderr)
            return 1
        correct += verdict
        print(json.dumps({**item, "correct": verdict, "method": method}))
    print(
        json.dumps(
            {"method": method, "items": len(items), "correct": correct, "accuracy": correct / max(1, len(items))}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
