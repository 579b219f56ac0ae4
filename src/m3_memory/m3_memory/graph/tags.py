"""Entity tags in memory text: <face_3>, <voice_1>, <person_2>; and entity ids, which include the things
seen (object_4, text_2: memories name those in words, so they are never tags)."""

from __future__ import annotations

import re

TAG_RE = re.compile(r"<((?:face|voice|person)_\d+)>")
ID_RE = re.compile(r"^(face|voice|person|object|text)_(\d+)$")


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


def thing_key(kind: str, perception_id: str) -> str:
    """The key of an object track or text region in a clip's id map ("object:cup-1", "text:text_2"): a
    detector's own ids may take any form, and must not read as a face or voice id."""
    return f"{kind}:{perception_id}"


def perception_kind(perception_id: str) -> str | None:
    """The entity kind a perception id (face_N, voice_N) or thing key (thing_key) makes."""
    kind, colon, _ = perception_id.partition(":")
    return kind if colon else kind_of(perception_id)
