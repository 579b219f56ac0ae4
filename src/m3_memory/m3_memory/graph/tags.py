"""Entity tags in memory text: <face_3>, <voice_1>, <person_2>."""

from __future__ import annotations

import re

TAG_RE = re.compile(r"<((?:face|voice|person)_\d+)>")
ID_RE = re.compile(r"^(face|voice|person)_(\d+)$")


def tags_in(text: str) -> list[str]:
    """Entity ids tagged in text, in order of first appearance, without repeats."""
    seen: list[str] = []
    for match in TAG_RE.finditer(text):
        if match.group(1) not in seen:
            seen.append(match.group(1))
    return seen


def kind_of(entity_id: str) -> str | None:
    match = ID_RE.match(entity_id)
    return match.group(1) if match else None


def seq_of(entity_id: str) -> int:
    match = ID_RE.match(entity_id)
    if not match:
        raise ValueError(f"not an entity id: {entity_id!r}")
    return int(match.group(2))
