"""The extractive back-end's plans: steps read from the instruction's own verb ("bring me the keys", "go to
the kitchen", "look at Bob"), with a place for a fetched object taken from the best memory when it names one.
Memory text never adds a step: the loop validates every plan against the instruction (skills.py)."""

from __future__ import annotations

import re

from m3_control.memory_client import Memory

PLACE_RE = re.compile(
    r"\b(?:in|on|at|under|inside|into|onto|near|behind|beside|next to)\s+"
    r"(the\s+[a-z]+(?:\s+(?:of|in|on)\s+the\s+[a-z]+)?)"
)


def plan_from(instruction: str, best: Memory | None) -> tuple:
    """Steps from the instruction's verb; a place for the object may come from the best memory (None: none)."""
    text = instruction.strip().rstrip(".!?")
    text = re.sub(r"^(please|can you|could you|would you)\s+", "", text, flags=re.IGNORECASE)
    place = PLACE_RE.search(best.text.lower()) if best is not None else None
    where = place.group(1) if place else ""
    bring = re.match(r"(?:bring|fetch|get|give|hand)\s+(me|\w+)\s+(?:the\s+|my\s+|his\s+|her\s+)?(.+)$", text, re.I)
    if bring:
        person, thing = bring.group(1), bring.group(2)
        steps = []
        if where:
            steps.append({"skill": "navigate_to", "target": where, "arguments": {}})
        steps.append({"skill": "pick", "target": thing, "arguments": {"from": where} if where else {}})
        steps.append({"skill": "navigate_to", "target": person, "arguments": {}})
        steps.append({"skill": "hand_over", "target": person, "arguments": {"object": thing}})
        return tuple(steps)
    go = re.match(r"(?:go|navigate|drive|move|(?:take|lead|guide)\s+me)\s+to\s+(.+)$", text, re.I)
    if go:
        return ({"skill": "navigate_to", "target": go.group(1), "arguments": {}},)
    look = re.match(r"look\s+at\s+(.+)$", text, re.I)
    if look:
        return ({"skill": "look_at", "target": look.group(1), "arguments": {}},)
    return ()
