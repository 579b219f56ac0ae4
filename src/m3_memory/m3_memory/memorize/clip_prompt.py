"""What the `openai` memorizer shows the model about one clip, and the shape its reply must take.

Small models need the evidence compact and explicit: which labels are one person (face = voice),
who else is visible while each utterance is said (an introduction names someone other than the
speaker: a person seen with them, or the next one who talks), and the utterances numbered in
order. The reply schema lets a name point only at one of those lines, with whose name it is there
(the speaker's, the listener's, someone introduced): name_mentions finds the label. A line
without a voice id is shown as said by "someone (voice unclear)": its words count, its speaker is
nobody's label.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from dataclasses import dataclass, field

from m3_memory.graph.records import KIND_FACE, ClipEvidence
from m3_memory.graph.tags import kind_of
from m3_memory.memorize.name_mentions import UNCERTAIN, Turns
from m3_memory.memorize.seen import describe_seen

MODEL_ROLES = ("self", "addressed", "introduced")  # the model marks no absent names: the cue words do
NS = 1_000_000_000
NEAR_NS = NS  # a face seen this close to an utterance counts as present while it is said


@dataclass
class ClipView:
    """The user message of one clip: its text, the labels it uses and the images that go with it."""

    text: str
    labels: list[str]  # "<face_1>", "<voice_2>", ... in order of first appearance
    images: list[tuple[str, bytes]] = field(default_factory=list)  # (caption, JPEG)
    turns: Turns = field(default_factory=Turns)  # the numbered speech lines: who spoke, who was seen
    known: dict[str, str] = field(default_factory=dict)  # label id -> the name its person already has

    @property
    def transcripts(self) -> list[str]:
        """What was said, line by line: names and facts the model gives are checked against it."""
        return self.turns.texts

    def content(self) -> str | list[dict]:
        """A plain string for text-only models (some servers reject part lists); parts with images."""
        if not self.images:
            return self.text
        parts: list[dict] = [{"type": "text", "text": self.text}]
        for caption, jpeg in self.images:
            parts.append({"type": "text", "text": caption})
            url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
            parts.append({"type": "image_url", "image_url": {"url": url}})
        return parts


def _seconds(ns: int) -> str:
    return f"{ns / NS:.0f}"


def person_groups(
    clip: ClipEvidence,
    ids: dict[str, str],
    person_of: Callable[[str], str | None],
    min_confidence: float,
    min_evidence: int,
) -> dict[str, str]:
    """label id -> representative id of its human: joined by this clip's matches or a stored person."""
    root: dict[str, str] = {}

    def find(entity_id: str) -> str:
        while root.get(entity_id, entity_id) != entity_id:
            entity_id = root[entity_id]
        return entity_id

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)

    present = sorted({ids[f.face_id] for f in clip.faces} | {ids[v.voice_id] for v in clip.voices if v.voice_id in ids})
    for match in clip.matches:
        if match.id1 in ids and match.id2 in ids and match.confidence >= min_confidence:
            if match.evidence_count >= min_evidence and {ids[match.id1], ids[match.id2]} <= set(present):
                union(ids[match.id1], ids[match.id2])
    by_person: dict[str, str] = {}
    for entity_id in present:
        person = person_of(entity_id)
        if person is not None:
            if person in by_person:
                union(by_person[person], entity_id)
            by_person.setdefault(person, entity_id)
    return {entity_id: find(entity_id) for entity_id in present}


def describe(
    clip: ClipEvidence,
    ids: dict[str, str],
    person_of: Callable[[str], str | None],
    name_of: Callable[[str], str],
    min_confidence: float = 0.5,
    min_evidence: int = 1,
) -> ClipView:
    """The clip as compact text: people (with known names), when faces are seen, the speech in order."""
    t0 = clip.start_ns
    spans: dict[str, list[int]] = {}
    for face in sorted(clip.faces, key=lambda f: f.stamp_ns):
        span = spans.setdefault(ids[face.face_id], [face.stamp_ns, face.stamp_ns])
        span[1] = max(span[1], face.stamp_ns)
    voices = [v for v in sorted(clip.voices, key=lambda v: (v.start_ns, v.segment_id)) if v.transcript.strip()]
    group = person_groups(clip, ids, person_of, min_confidence, min_evidence)
    order = list(dict.fromkeys([*spans, *(ids[v.voice_id] for v in clip.voices if v.voice_id in ids)]))
    members: dict[str, list[str]] = {}
    for entity_id in order:
        members.setdefault(group[entity_id], []).append(entity_id)
    people, names = [], {}
    for ids_of_one in members.values():
        ids_of_one.sort(key=lambda e: kind_of(e) != KIND_FACE)
        known = next((n for e in ids_of_one if (n := name_of(e))), "")
        people.append(" = ".join(f"<{e}>" for e in ids_of_one) + (f" ({known})" if known else ""))
        if known:
            names[ids_of_one[0]] = known
    lines = [f"Clip of {_seconds(clip.end_ns - clip.start_ns)} s. People: " + "; ".join(people)]
    if spans:
        seen = ", ".join(f"<{e}> {_seconds(a - t0)}-{_seconds(b - t0)} s" for e, (a, b) in spans.items())
        lines.append(f"Seen: {seen}")
    lines.extend(describe_seen(clip, ids, t0))  # objects and written text
    if voices:
        lines.append("Speech:")
    turns = Turns(group=dict(group), present=list(order), before=clip.line_before)
    for number, voice in enumerate(voices, 1):
        speaker = ids.get(voice.voice_id, UNCERTAIN)  # no voice id: perception could not tell who
        others = [
            e
            for e, (a, b) in spans.items()
            if group[e] != group.get(speaker) and a <= voice.end_ns + NEAR_NS and b >= voice.start_ns - NEAR_NS
        ]
        with_whom = ", seen with " + ", ".join(f"<{e}>" for e in others) if others else ""
        who = f"<{speaker}>" if speaker else "someone (voice unclear)"
        lines.append(f'{number}. {who}{with_whom}: "{voice.transcript.strip()}"')
        turns.speakers.append(speaker)
        turns.seen_with.append(others)
        turns.texts.append(voice.transcript.strip())
        turns.starts.append(voice.start_ns)
        turns.ends.append(voice.end_ns)
    if not voices:
        lines.append("Speech: none")
    return ClipView("\n".join(lines), [f"<{e}>" for e in order], turns=turns, known=names)


def add_images(view: ClipView, clip: ClipEvidence, ids: dict[str, str], keyframes: int, max_px: int) -> None:
    """Up to `keyframes` frames of the clip, evenly spread, then one crop per face label (JPEG,
    longest side at most max_px), each with a caption that says what it is."""
    if keyframes <= 0:
        return
    frames = clip.keyframes or ([(clip.start_ns, clip.keyframe_jpeg)] if clip.keyframe_jpeg else [])
    if len(frames) > keyframes:
        frames = [frames[round(i * (len(frames) - 1) / max(1, keyframes - 1))] for i in range(keyframes)]
    for stamp_ns, jpeg in frames:
        view.images.append((f"Frame at {_seconds(stamp_ns - clip.start_ns)} s:", shrink_jpeg(jpeg, max_px)))
    crops: dict[str, bytes] = {}
    for face in sorted(clip.faces, key=lambda f: -f.quality):
        if face.crop_jpeg and ids[face.face_id] not in crops:
            crops[ids[face.face_id]] = face.crop_jpeg
    for entity_id in sorted(crops):
        view.images.append((f"Face <{entity_id}>:", shrink_jpeg(crops[entity_id], max_px)))


def shrink_jpeg(jpeg: bytes, max_px: int) -> bytes:
    """The image with its longest side at most max_px (image tokens grow with pixels); as is when
    already small or not decodable (the server then reports it)."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(jpeg)) as image:
            if max(image.size) <= max_px:
                return jpeg
            image = image.convert("RGB")
            image.thumbnail((max_px, max_px))
            out = io.BytesIO()
            image.save(out, format="JPEG", quality=85)
            return out.getvalue()
    except (ImportError, OSError, ValueError):
        return jpeg


def reply_schema(lines: int, max_names: int = 4, max_semantic: int = 5, max_episodic: int = 3) -> dict:
    """JSON schema of the reply: names as (line, name, whose) items over this clip's speech lines
    (name_mentions places them), facts and events as short strings with this clip's labels;
    bounded so that a reply stays within the clip's time budget."""
    text = {"type": "string", "minLength": 3, "maxLength": 140}
    return {
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "maxItems": max_names if lines else 0,
                "items": {
                    "type": "object",
                    "properties": {
                        "line": {"type": "integer", "enum": list(range(1, lines + 1)) or [1]},
                        "name": {"type": "string", "minLength": 2, "maxLength": 30},
                        "whose": {"type": "string", "enum": list(MODEL_ROLES)},
                    },
                    "required": ["line", "name", "whose"],
                    "additionalProperties": False,
                },
            },
            "semantic": {"type": "array", "maxItems": max_semantic, "items": text},
            "episodic": {"type": "array", "maxItems": max_episodic, "items": text},
        },
        "required": ["names", "semantic", "episodic"],
        "additionalProperties": False,
    }
