"""Whose name was said: the model reads a line, the turns tell who that is.

A small model reads one line fairly well ("I'm Ana": the speaker's own name; "thanks, Ana": the one
addressed; "this is Ana": someone introduced) but often picks the wrong one of a clip's <face_N> and
<voice_N> labels for it ("Omar, did you...?" gave Omar to the speaker). Measured with the embedded
Qwen2.5-Coder-1.5B on 11 short scenes written for this (other names than the demo's): labels chosen
by the model put 8 of 14 names on the right person; line and role placed here, 9 of 12 (README of
m3_memory). So the model names the line and the role, and
the label follows from the turns, as conversation analysis describes them: a name said to someone
selects the next speaker (Sacks, Schegloff & Jefferson 1974). The one spoken to is the next other
person who talks in the clip, else the one who talked before, else the only other person seen while
the line was said; someone introduced is found the same way, leaving out that line's listener.
Each mention is one vote for a name (graph_people), so one misheard name is outvoted by the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ROLES = ("self", "addressed", "introduced")


@dataclass
class Turns:
    """The clip's speech lines in order, as the model saw them numbered from 1."""

    speakers: list[str] = field(default_factory=list)  # label id of each line's speaker (voice_N)
    seen_with: list[list[str]] = field(default_factory=list)  # per line: other people's labels seen meanwhile
    texts: list[str] = field(default_factory=list)  # per line: what was said
    group: dict[str, str] = field(default_factory=dict)  # label id -> the clip's id for its person

    def whose(self, line: int, role: str, listener: str | None = None) -> str | None:
        """The label id the name said in `line` (1-based) in `role` belongs to; None when the turns
        cannot tell (nobody else talks or is seen, or several people are seen and none talks)."""
        if not 1 <= line <= len(self.speakers) or role not in ROLES:
            return None
        i = line - 1
        if role == "self":
            return self.speakers[i]
        excluded = {self.group[self.speakers[i]]}
        if role == "introduced" and listener is not None:
            excluded.add(self.group.get(listener, listener))
        for candidates in (self.speakers[i + 1 :], self.speakers[i - 1 :: -1] if i else []):
            found = next((s for s in candidates if self.group[s] not in excluded), None)
            if found is not None:
                return found
        seen = {self.group[e]: e for e in self.seen_with[i] if self.group[e] not in excluded}
        return next(iter(seen.values())) if len(seen) == 1 else None


def resolve_mentions(turns: Turns, mentions: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """(line, name, label id) for each mention the turns can place, in the model's order; someone
    introduced on a line where a listener is named is looked for among the others."""
    listeners: dict[int, str] = {}
    for line, _, role in mentions:
        if role == "addressed" and (label := turns.whose(line, role)) is not None:
            listeners.setdefault(line, label)
    placed = [(line, name, turns.whose(line, role, listeners.get(line))) for line, name, role in mentions]
    return [(line, name, label) for line, name, label in placed if label is not None]


def labelled_text(text: str, labels_by_name: dict[str, str]) -> str:
    """The text with each name of a person in the clip written as that person's label ("Ana likes
    tea" -> "<voice_2> likes tea"), so the memory follows the person when a misheard name is later
    outvoted; names given to more than one person are left as they are (the caller leaves them out)."""
    for name, label in sorted(labels_by_name.items(), key=lambda item: -len(item[0])):
        text = re.sub(rf"(?<![\w<]){re.escape(name)}(?!\w)", f"<{label}>", text)
    return text
