"""What a statement says about where a thing is or when an event happens, read by a language model.

The rules (graph/fact_changes.facts_of) read a fixed set of phrasings; an intransitive "the leash hangs
by the door", "the book club meets on Tuesday" or "I stuck the receipt on the fridge" states nothing to
them. With a model memorizer, the model reads the statements that supersession compares (a new
statement the rules find a fact in, and the older memories near it that name the same thing), and the
comparison stays structural (fact_changes.supersedes: same thing, same slot, another value). A 1.5B
model asked directly whether one statement replaces another answered yes to every pair tried (also
"the phone is on the table" for "the keys are in the drawer"); asked what one statement states, it
was right on 53 of 57 pairs (README of m3_memory, Facts that change).

A reply that cannot be used (no JSON, a thing or place the statement does not contain) raises
FactReaderError; memory then lets the rules read that statement and logs why.
"""

from __future__ import annotations

import http.client
import re
import urllib.error
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from m3_memory.graph.fact_changes import Fact, reading
from m3_memory.memorize.json_reply import first_json_object, response_format

PROMPT = Path(__file__).with_name("prompts") / "facts.txt"
SCHEMA = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": ["place", "time", "none"]},
        "thing": {"type": "string"},
        "value": {"type": "string"},
    },
    "required": ["kind", "thing", "value"],
}
MAX_TEXT_CHARS = 600  # a longer memory is no single statement: the rules read it
CACHE_SIZE = 4096  # statements read (an older memory is compared with many new ones)


class FactReaderError(RuntimeError):
    """The model's reading of a statement could not be had or used."""


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class ModelFactReader:
    """One chat request per statement (cached), over the memorizer's endpoint (`post`: a request body
    -> the reply's content; OpenAIMemorizer.fact_reader)."""

    def __init__(self, post: Callable[[dict], str], model: str, form: str = "json_object") -> None:
        self._post = post
        self._model = model
        self._format = response_format(form, SCHEMA, "statement_fact", "openai_response_format")
        self._prompt = PROMPT.read_text(encoding="utf-8")
        self._cache: OrderedDict[str, list[Fact]] = OrderedDict()
        self.reads = 0  # requests sent (not cached)

    def facts(self, text: str) -> list[Fact]:
        """The fact the statement states ([] when none); raises FactReaderError."""
        if text in self._cache:
            self._cache.move_to_end(text)
            return self._cache[text]
        if len(text) > MAX_TEXT_CHARS:
            raise FactReaderError(f"statement of {len(text)} chars is longer than {MAX_TEXT_CHARS}")
        body: dict = {
            "model": self._model,
            "messages": [{"role": "system", "content": self._prompt}, {"role": "user", "content": text}],
            "temperature": 0.0,
            "max_tokens": 64,
        }
        if self._format is not None:
            body["response_format"] = self._format
        try:
            reply = self._post(body)
        except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException, ValueError) as error:
            raise FactReaderError(f"{type(error).__name__}: {error}") from error
        self.reads += 1
        facts = self._parse(reply, text)
        self._cache[text] = facts
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return facts

    @staticmethod
    def _parse(reply: str, text: str) -> list[Fact]:
        value = first_json_object(reply)
        if value is None or not all(isinstance(value.get(k), str) for k in ("kind", "thing", "value")):
            raise FactReaderError(f"reply is not the JSON object asked for: {reply[:200]!r}")
        if value["kind"] not in ("place", "time", "none"):
            raise FactReaderError(f"unknown kind {value['kind']!r}")
        fact = reading(value["kind"], value["thing"], value["value"])
        if fact is None:
            return []
        said = _words(text)
        if not _words(fact.subject) & said or (fact.slot == "location" and not _words(fact.value) & said):
            raise FactReaderError(f"reply names what the statement does not say: {reply[:200]!r}")
        return [fact]
