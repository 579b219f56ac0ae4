"""What the camera showed besides faces, as memories: objects perception's detector tracked and written
text it read (issue 23). Both memorizers store these lines (the record of the evidence, as "<face_1> is
seen."), and the model memorizer's clip text shows them (clip_prompt.describe).

One episodic memory per object class seen in the clip ("<face_2> is seen near a cup.", "A cup is seen.")
and one per piece of text ('A written note or sign says: "Dentist Tuesday 3 pm"'). People are the face
pipeline's: the detector's "person" boxes give no memory. A face seen within NEAR_NS of an object's
sightings was in view with it: "seen near", which claims no holding, since everyone in view would be
holding it (three people around a table and a cup). Who has it comes from the boxes (memorize.holders):
"<face_2> picks up a cup.", "holds", "puts down"; and then no face is "seen near" that class in the clip.
Lines of text one keyframe shows stacked are one note (text_blocks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from m3_memory.graph.records import (
    KIND_EPISODIC,
    KIND_OBJECT,
    KIND_TEXT,
    PEOPLE_LABELS,
    ClipEvidence,
    MemoryDraft,
    TextEvidence,
    label_of,
)
from m3_memory.graph.tags import thing_key
from m3_memory.memorize.holders import holder_events

NS = 1_000_000_000
NEAR_NS = NS // 2  # a face seen this close to an object's sighting was in view with it
# What OCR reads is on notes, signs, labels and screens; the words people ask with ("what does the note
# say?", "what was written on the sign?") are in the memory, so a search and the rules' reasoner find it.
WRITTEN = "A written note or sign says:"
LINE_GAP = 1.2  # the most space between two lines of one note, in line heights
# ... and the most their boxes may overlap: a turned note's lines have axis-aligned boxes taller than the
# letters, and the detector pads them
LINE_OVERLAP = 0.5
MIN_CHARACTERS = 2  # letters or digits a reading needs: a lone "K" is a stroke of something, not text


@dataclass
class SeenObject:
    """One class of object seen in a clip: how many tracked objects, when, and the faces in view with it."""

    label: str
    object_ids: list[str] = field(default_factory=list)
    first_ns: int = 0
    last_ns: int = 0
    stamps: list[int] = field(default_factory=list)
    with_faces: list[str] = field(default_factory=list)  # memory ids, first seen first


@dataclass
class SeenText:
    """One piece of written text read in a clip (regions with the same reading count once)."""

    text: str
    first_ns: int
    last_ns: int
    confidence: float
    region_ids: list[str] = field(default_factory=list)  # perception's regions it was read in


def _article(label: str) -> str:
    return "An" if label[:1].lower() in "aeiou" else "A"


def seen_objects(clip: ClipEvidence, ids: dict[str, str]) -> list[SeenObject]:
    """The clip's object classes (people's boxes left out), in the order first seen, with the faces (memory
    ids) seen within NEAR_NS of one of their sightings."""
    by_label: dict[str, SeenObject] = {}
    for o in sorted(clip.objects, key=lambda o: (o.stamp_ns, o.object_id)):
        label = label_of(o.label)
        if not label or label in PEOPLE_LABELS:
            continue
        seen = by_label.setdefault(label, SeenObject(label, first_ns=o.stamp_ns, last_ns=o.stamp_ns))
        if o.object_id not in seen.object_ids:
            seen.object_ids.append(o.object_id)
        seen.last_ns = max(seen.last_ns, o.stamp_ns)
        seen.stamps.append(o.stamp_ns)
    for face in sorted(clip.faces, key=lambda f: (f.stamp_ns, f.face_id)):
        face_id = ids.get(face.face_id)
        for seen in by_label.values():
            near = any(abs(face.stamp_ns - t) <= NEAR_NS for t in seen.stamps)
            if face_id and near and face_id not in seen.with_faces:
                seen.with_faces.append(face_id)
    return list(by_label.values())


def _stacked(upper: TextEvidence, lower: TextEvidence) -> bool:
    """Two lines of one note: `lower` starts under `upper` within LINE_GAP line heights (their boxes
    overlapping by LINE_OVERLAP at most), their spans across overlap, and their letters are of a size (ratio
    at most 2)."""
    ux, uy, uw, uh = upper.bbox
    lx, ly, lw, lh = lower.bbox
    size = max(uh, lh)
    return (
        -LINE_OVERLAP * size <= ly - (uy + uh) <= LINE_GAP * size
        and ly > uy
        and min(ux + uw, lx + lw) > max(ux, lx)
        and min(uh, lh) * 2 >= size
    )


def text_blocks(texts: list[TextEvidence]) -> list[TextEvidence]:
    """The lines read in one keyframe joined into blocks, top to bottom: a note or sign of several lines
    is one text ("Please take" over "off your shoes" -> "Please take off your shoes"), as a person reads
    it. The block's region id joins its lines' ids; its confidence is its least sure line's."""
    return [_joined(lines) for lines in _line_blocks(texts)]


def _line_blocks(texts: list[TextEvidence]) -> list[list[TextEvidence]]:
    """The lines of one keyframe grouped into blocks (text_blocks), top to bottom."""
    blocks: list[list[TextEvidence]] = []
    for line in sorted(texts, key=lambda t: (t.bbox[1], t.bbox[0])):
        block = next((b for b in blocks if _stacked(b[-1], line)), None)
        if block is None:
            blocks.append([line])
        else:
            block.append(line)
    return blocks


def _joined(lines: list[TextEvidence]) -> TextEvidence:
    x0, y0 = min(t.bbox[0] for t in lines), min(t.bbox[1] for t in lines)
    x1 = max(t.bbox[0] + t.bbox[2] for t in lines)
    y1 = max(t.bbox[1] + t.bbox[3] for t in lines)
    return TextEvidence(
        "+".join(t.region_id for t in lines),
        " ".join(" ".join(t.text.split()) for t in lines),
        min(t.confidence for t in lines),
        (x0, y0, x1 - x0, y1 - y0),
        lines[0].stamp_ns,
    )


def seen_texts(clip: ClipEvidence) -> list[SeenText]:
    """The clip's written text, each reading once, first read first: lines of one keyframe joined into
    blocks (text_blocks), a block read several times keeping its most confident reading, and a reading
    that a longer one of the clip contains (a line of the note missed in one keyframe) left out."""
    by_stamp: dict[int, list[TextEvidence]] = {}
    for t in clip.texts:
        by_stamp.setdefault(t.stamp_ns, []).append(t)
    by_region: dict[str, SeenText] = {}
    for stamp in sorted(by_stamp):
        for lines in _line_blocks(by_stamp[stamp]):
            t = _joined(lines)
            text = " ".join(t.text.split())
            if sum(c.isalnum() for c in text) < MIN_CHARACTERS:
                continue
            old = by_region.get(t.region_id)
            if old is None:
                regions = [line.region_id for line in lines]
                by_region[t.region_id] = SeenText(text, t.stamp_ns, t.stamp_ns, t.confidence, regions)
                continue
            old.last_ns = t.stamp_ns
            if t.confidence > old.confidence:
                old.text, old.confidence = text, t.confidence
    unique: dict[str, SeenText] = {}
    for seen in by_region.values():
        kept = unique.setdefault(seen.text.lower(), seen)
        kept.last_ns = max(kept.last_ns, seen.last_ns)
        kept.region_ids += [r for r in seen.region_ids if r not in kept.region_ids]
    readings = list(unique.values())
    whole = [
        seen
        for seen in readings
        if not any(seen is not other and seen.text.lower() in other.text.lower() for other in readings)
    ]
    for part in readings:  # a part's sightings count for the whole it belongs to
        if part not in whole:
            for seen in whole:
                if part.text.lower() in seen.text.lower():
                    seen.first_ns, seen.last_ns = min(seen.first_ns, part.first_ns), max(seen.last_ns, part.last_ns)
                    seen.region_ids += [r for r in part.region_ids if r not in seen.region_ids]
    return whole


def seen_drafts(clip: ClipEvidence, ids: dict[str, str]) -> list[MemoryDraft]:
    """Episodic memories of the objects and written text the clip showed (module docstring), and who picks
    up, holds and puts down what (memorize.holders)."""
    drafts = []
    events = holder_events(clip, ids)
    held = {e.label for e in events}
    for e in events:
        text = f"<{e.face_id}> {e.kind} {_article(e.label).lower()} {e.label}."
        drafts.append(
            MemoryDraft(KIND_EPISODIC, text, e.stamp_ns, e.stamp_ns, _things(ids, KIND_OBJECT, [e.object_id]))
        )
    for seen in seen_objects(clip, ids):
        if seen.label in held:
            # the boxes showed who has it: the events above say so, and the others in view only stood by
            # (the tracker may split one thing into several ids, so the class, not the id, decides)
            continue
        count = f" ({len(seen.object_ids)} of them)" if len(seen.object_ids) > 1 else ""
        thing = f"{_article(seen.label).lower()} {seen.label}{count}"
        if seen.with_faces:  # person first: "what was Bob carrying?" asks about the person
            people = " and ".join(f"<{f}>" for f in seen.with_faces)
            verb = "is" if len(seen.with_faces) == 1 else "are"
            text = f"{people} {verb} seen near {thing}."  # in view together; holding is the events' to say
        else:
            text = f"{thing[0].upper()}{thing[1:]} is seen."
        things = _things(ids, KIND_OBJECT, seen.object_ids)
        drafts.append(MemoryDraft(KIND_EPISODIC, text, seen.first_ns, seen.last_ns, things))
    for seen in seen_texts(clip):
        text = f'{WRITTEN} "{seen.text}"'
        things = _things(ids, KIND_TEXT, seen.region_ids)
        drafts.append(MemoryDraft(KIND_EPISODIC, text, seen.first_ns, seen.last_ns, things))
    return drafts


def _things(ids: dict[str, str], kind: str, perception_ids: list[str]) -> list[str]:
    """The memory entities of a clip's object tracks or text regions (graph.things), where ids has them."""
    found = [ids.get(thing_key(kind, p), "") for p in perception_ids]
    return list(dict.fromkeys(e for e in found if e))


def describe_seen(clip: ClipEvidence, ids: dict[str, str], t0_ns: int) -> list[str]:
    """Lines for a model's clip text: objects with when they were seen (seconds into the clip) and who was in
    view, who picked up, held or put down what, and the text read."""
    lines = []
    objects = seen_objects(clip, ids)
    if objects:
        parts = []
        for seen in objects:
            people = " with " + ", ".join(f"<{f}>" for f in seen.with_faces) if seen.with_faces else ""
            when = f"{(seen.first_ns - t0_ns) / NS:.1f}-{(seen.last_ns - t0_ns) / NS:.1f} s"
            parts.append(f"{seen.label} ({len(seen.object_ids)}) {when}{people}")
        lines.append("Objects seen: " + "; ".join(parts))
    events = holder_events(clip, ids)
    if events:
        held = [f"<{e.face_id}> {e.kind} {e.label} {(e.stamp_ns - t0_ns) / NS:.1f} s" for e in events]
        lines.append("Held: " + "; ".join(held))
    texts = seen_texts(clip)
    if texts:
        lines.append("Written text seen: " + "; ".join(f'"{t.text}"' for t in texts))
    return lines
