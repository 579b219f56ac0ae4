"""What `m3 bench control` drives the control loop with: the scripted model, the questions it asks
(made from the memory's own sentences) and a memory client that times each call.

Why apart from the bench (m3_agent.bench.control): these stand in for the model and wrap the
memory; the bench builds the memory, runs the goals and turns the times into figures.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

from m3_control.memory_client import Clip, Memory
from m3_control.reasoner import Answer, LoopState, Search

TAG_RE = re.compile(r"<((?:face|voice|person)_\d+)>")
EVENT_RE = re.compile(r"\s*\(event \d+\)\.?\s*$")


class ScriptedReasoner:
    """The scripted model: the next prepared query each round, an answer naming an entity in the last one."""

    def __init__(self, queries: list[str], answer: str) -> None:
        self._queries: Iterator[str] = itertools.cycle(queries)
        self._lock = threading.Lock()
        self.answer = answer
        self.ms_by_round: dict[int, float] = defaultdict(float)  # time spent in decide(), per round

    def decide(self, state: LoopState) -> Search | Answer:
        start = time.perf_counter()
        if state.must_answer:
            decision: Search | Answer = Answer(self.answer)
        else:
            with self._lock:
                decision = Search(next(self._queries))
        self.ms_by_round[state.round] += (time.perf_counter() - start) * 1000
        return decision


class TimedMemory:
    """A MemoryClient passing every call on to another and recording how long each took."""

    def __init__(self, client) -> None:
        self.client = client
        self.ms: dict[str, list[float]] = defaultdict(list)
        self.hits: list[int] = []

    def search_clip(self, *args, **kwargs) -> list[Clip]:
        start = time.perf_counter()
        clips = self.client.search_clip(*args, **kwargs)
        self.ms["search_clip"].append((time.perf_counter() - start) * 1000)
        self.hits.append(sum(len(c.memories) for c in clips))
        return clips

    def search_node(self, *args, **kwargs) -> list[Memory]:
        start = time.perf_counter()
        nodes = self.client.search_node(*args, **kwargs)
        self.ms["search_node"].append((time.perf_counter() - start) * 1000)
        return nodes

    def entity_name(self, entity_id: str) -> str | None:
        start = time.perf_counter()
        name = self.client.entity_name(entity_id)
        self.ms["entity_name"].append((time.perf_counter() - start) * 1000)
        return name

    def entity_names(self, entity_ids: list[str], people: bool = False) -> dict[str, str]:
        start = time.perf_counter()
        names = self.client.entity_names(entity_ids, people)
        self.ms["entity_names"].append((time.perf_counter() - start) * 1000)
        return names


def scripted_queries(memory, count: int, seed: int = 7) -> tuple[list[str], str]:
    """count questions made from random stored memories (every 4th asks for a character id), and the
    answer the scripted model gives (naming an entity of the first one)."""
    rng = random.Random(seed)
    texts = [node.text for node in memory.graph.text.values()]
    if not texts:
        raise ValueError("the memory holds no text memories to ask about")
    queries, entity = [], None
    for k in range(count):
        core = EVENT_RE.sub("", rng.choice(texts)).rstrip(".")
        entity = entity or next(iter(TAG_RE.findall(core)), None)
        if k % 4 == 1:
            queries.append(f"What is the character id of the one in: {core}?")
        else:
            queries.append(f"When did this happen: {core}?")
    answer = f"<{entity}> did it." if entity else "It happened in the first clip."
    return queries, answer
