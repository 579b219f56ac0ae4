"""Relative times in a question narrow the loop's searches to their window, on a real memory (MiniLM
embedder, rules memorizer) reached through DirectMemoryClient: "this morning" finds what was said this
morning, not what was said about the same thing in the afternoon; a time that is part of what is asked
("on Saturday") narrows nothing."""

from __future__ import annotations

import calendar

import numpy as np
import pytest

from m3_control.direct_memory_client import DirectMemoryClient
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import SUCCEEDED, LoopConfig, run_loop
from m3_control.relative_times import search_window, without_phrase
from m3_control.skills import load_skills
from m3_memory.graph.records import ClipEvidence, VoiceEvidence
from m3_memory.memory import Memory as M3Memory
from m3_memory.search.embedder import TextEmbedder

S = 1_000_000_000
DAY = calendar.timegm((2026, 3, 10, 0, 0, 0)) * S  # a Tuesday, UTC midnight
H = 3600 * S


def said(index: int, at_ns: int, text: str) -> ClipEvidence:
    vector = np.random.default_rng(7).normal(size=192)
    utterance = VoiceEvidence("voice_1", at_ns, at_ns + 3 * S, text, 0.9, list(vector / np.linalg.norm(vector)), index)
    return ClipEvidence(index, at_ns - S, at_ns + 29 * S, voices=[utterance])


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    m = M3Memory.open(str(tmp_path_factory.mktemp("times") / "m"), TextEmbedder())
    m.ingest(said(0, DAY - 14 * H, "the parcel is on the porch"))  # yesterday, 10:00
    m.ingest(said(1, DAY + 9 * H, "the parcel is in the hallway"))  # today, 09:00
    m.ingest(said(2, DAY + 15 * H, "the parcel is in the kitchen"))  # today, 15:00
    yield DirectMemoryClient(m)
    m.close()


def ask(memory, question: str, asked_ns: int) -> str:
    config = LoopConfig(max_rounds=2, asked_ns=asked_ns)
    result = run_loop(question, ExtractiveReasoner(), memory, load_skills(), config)
    assert result.code == SUCCEEDED
    return result.answer


@pytest.mark.parametrize(
    ("question", "place"),
    [
        ("Where was the parcel this morning?", "hallway"),
        ("Where did someone say the parcel was yesterday?", "porch"),
        ("Where was the parcel an hour ago?", "kitchen"),
    ],
)
def test_a_relative_time_narrows_the_search_to_its_window(memory, question, place):
    assert place in ask(memory, question, DAY + 16 * H)


def test_without_a_question_time_nothing_is_narrowed(memory):
    assert search_window("Where was the parcel this morning?", 0, 0) == (0, 0, "")


@pytest.mark.parametrize(
    "question",
    ["Where does Rosa work on Saturday?", "What does Zara do every Saturday?", "What is Bob doing tonight?"],
)
def test_a_time_that_is_part_of_what_is_asked_narrows_nothing(question):
    assert search_window(question, DAY + 20 * H, 0) == (0, 0, "")


def test_the_window_stays_inside_the_goals_as_of_limit():
    assert search_window("What did Alice say today?", DAY + 20 * H, DAY + 12 * H) == (DAY, DAY + 12 * H, "today")


def test_the_time_phrase_leaves_the_search_text():
    assert without_phrase("Where was the parcel An Hour Ago?", "an hour ago") == "Where was the parcel ?"
    assert without_phrase("yesterday", "yesterday") == "yesterday"  # nothing else to search with
    assert without_phrase("Where is it?", "") == "Where is it?"
