"""Compact knowledge turns for small models: the few most relevant memories, as short lines with names.

Why: the reference turn is every memory of the top clips as JSON keyed by memory id, several
hundred tokens a search; on a CPU a small model reads about 90 tokens a second, and ids in the text
come back as ids in its answers. Here each search shows at most `limit` memories not shown before:
the best by their similarity to the query, with the instruction's words as a tie-break (the
extractive reasoner's coverage), bookkeeping dropped ("X is seen", equivalences, "<face_1> is
called Alice"), ids rendered as the names memory knows (names.py; its current names, which the
loop learns, before "is called" memories), and the lines in time order
("[clip 3] ...", "[clip 3, robot in the kitchen] ..." where memory knows the region it happened in) so that
the latest state of things comes last. A line that asks a question comes with
the next speaker's reply (answer_kinds.reply_to), even past the limit. An instruction that asks for an id
sees the ids. Memory text stays data: the system prompt says so, and plan steps are validated
against the user's own instruction whatever the model reads.
"""

from __future__ import annotations

from dataclasses import replace

from m3_control.answer_kinds import reply_to
from m3_control.extractive_reasoner import content_words, is_bookkeeping, question_words
from m3_control.loop import EMPTY_HINT, asks_for_id
from m3_control.memory_client import Clip, Memory, shown_place, shown_text
from m3_control.names import names_from, with_names
from m3_control.reasoner import LoopState

KNOWLEDGE_STYLES = ("reference", "compact")
COVERAGE_WEIGHT = 0.3  # how much the share of the instruction's words adds to a memory's similarity


def relevance(memory: Memory, words: set[str], text: str) -> float:
    """Similarity to the query plus a share of the instruction's content words it contains."""
    have = content_words(text)
    coverage = len(words & have) / len(words) if words else 0.0
    return memory.score + COVERAGE_WEIGHT * coverage


def _place(memory: Memory) -> str:
    """ ", robot in the kitchen" when memory knows the region the robot was in when the memory happened."""
    return f", {place}" if (place := shown_place(memory)) else ""


def compact_knowledge(clips: list[Clip], nodes: list[Memory], state: LoopState, limit: int) -> str:
    """The knowledge turn of one search: up to `limit` new memories, in time order, names for ids."""
    wants_ids = asks_for_id(state.instruction)
    names = {} if wants_ids else {**names_from(state.evidence), **state.names}
    words = question_words(state.instruction)
    retrieved = [m for clip in clips for m in clip.memories] + list(nodes)
    candidates: dict[str, tuple[float, int, Memory, str]] = {}
    seen_texts = set()
    for order, memory in enumerate(retrieved):
        if memory.node_id in state.shown or memory.node_id in candidates:
            continue
        text = with_names(shown_text(memory).strip(), names)
        if not wants_ids and (is_bookkeeping(memory) or is_bookkeeping(replace(memory, text=text))):
            continue
        if text.lower() in seen_texts:
            continue
        seen_texts.add(text.lower())
        candidates[memory.node_id] = (relevance(memory, words, text), order, memory, text)
    best = sorted(candidates.values(), key=lambda c: (-c[0], c[1]))[:limit]
    # a line asking what the user asks ("Where do you keep the aprons?") is shown with its reply, which
    # shares few of the question's words ("On the hooks behind the door.") and would be left out
    chosen = {c[2].node_id for c in best}
    for _, _, memory, _ in list(best):
        reply = reply_to(memory, retrieved)
        if reply is not None and reply.node_id in candidates and reply.node_id not in chosen:
            best.append(candidates[reply.node_id])
            chosen.add(reply.node_id)
    best.sort(key=lambda c: (c[2].clip_index, c[1]))
    state.shown.update(c[2].node_id for c in best)
    if not best:
        return "Memories found: none new.\n" + EMPTY_HINT
    lines = [f"[clip {memory.clip_index}{_place(memory)}] {text}" for _, _, memory, text in best]
    return "Memories found:\n" + "\n".join(lines)
