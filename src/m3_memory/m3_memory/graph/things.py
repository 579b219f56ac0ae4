"""Things seen in the memory graph (issue 23): objects perception's detector tracked and pieces of written
text it read become entities, as faces and voices do, so memory can say what was seen, when and where.

An object entity is one of perception's tracks (ids stable within an episode): its label is the detector's
class, its crop the track's most confident one; a text entity is one region of text read at one place,
labelled with its most confident reading. Both keep first and last sighting, the clips they were seen in
(a Sighting per clip, with where the robot was) and the memories about them (the "seen" lines and who
picked up, held or put down what: m3_memory.memorize.seen), whose entity ids also hold the people in view.
They have no person and no name: they are never matched by embedding, and a new run's tracks make new
entities (perception re-identifies an object within an episode only).

A mixin of MemoryGraph, which owns the state these methods read and change.
"""

from __future__ import annotations

from m3_memory.graph.backend import StoreWriter
from m3_memory.graph.records import (
    KIND_OBJECT,
    KIND_TEXT,
    PEOPLE_LABELS,
    ClipEvidence,
    EntityRecord,
    Sighting,
    label_of,
)
from m3_memory.graph.tags import thing_key


def thing_keys(clip: ClipEvidence) -> dict[str, int]:
    """The clip's object tracks and text regions as id-map keys (tags.thing_key), with when each was first
    seen; people's boxes are left out (the face pipeline's), as is text with nothing to read."""
    first: dict[str, int] = {}
    for o in clip.objects:
        if o.object_id and label_of(o.label) and label_of(o.label) not in PEOPLE_LABELS:
            key = thing_key(KIND_OBJECT, o.object_id)
            first[key] = min(first.get(key, o.stamp_ns), o.stamp_ns)
    for t in clip.texts:
        if t.region_id and t.text.strip():
            key = thing_key(KIND_TEXT, t.region_id)
            first[key] = min(first.get(key, t.stamp_ns), t.stamp_ns)
    return first


class ThingsMixin:
    """Object and text entities: creation and one clip's sightings; see the module docstring."""

    def _create_thing(self, writer: StoreWriter, kind: str, clip_index: int) -> str:
        """A new object or text entity (no person: things are not people)."""
        seq = self.backend.entity_number(writer.next_id(kind))
        record = EntityRecord(f"{kind}_{seq}", seq, kind, first_clip=clip_index, last_clip=clip_index)
        writer.add_entity(record)
        self.entities[record.entity_id] = record
        return record.entity_id

    def _observe_things(self, writer: StoreWriter, clip: ClipEvidence, mapped: dict[str, str]) -> None:
        """Counts, times, the label, the best crop and the clip's sighting of every thing seen in the clip."""
        seen: dict[str, list[tuple[int, str, float, bytes]]] = {}  # entity -> (stamp, label, confidence, crop)
        for o in clip.objects:
            entity_id = mapped.get(thing_key(KIND_OBJECT, o.object_id))
            if entity_id:
                seen.setdefault(entity_id, []).append((o.stamp_ns, label_of(o.label), o.confidence, o.crop_jpeg))
        for t in clip.texts:
            entity_id = mapped.get(thing_key(KIND_TEXT, t.region_id))
            if entity_id:
                seen.setdefault(entity_id, []).append((t.stamp_ns, " ".join(t.text.split()), t.confidence, b""))
        for entity_id, items in seen.items():
            record = self.entities[entity_id]
            stamps = [stamp for stamp, *_ in items]
            if record.observation_count == 0:
                record.first_ns, record.first_clip = min(stamps), clip.clip_index
            record.observation_count += len(items)
            record.last_ns, record.last_clip = max(record.last_ns, max(stamps)), clip.clip_index
            # crop_score: the confidence of the sighting the label came from (an object's crop: perception
            # sends a track's crop when a more confident sighting gives a new one)
            prior = record.crop_score
            _, label, confidence, _ = max(items, key=lambda item: (item[2], item[0]))
            if label and (confidence > prior or not record.label):
                record.label, record.crop_score = label, float(confidence)
            crops = [item for item in items if item[3]]
            if crops:
                _, _, confidence, crop = max(crops, key=lambda item: (item[2], item[0]))
                if confidence >= prior:
                    writer.set_crop(entity_id, max(record.crop_score, float(confidence)), crop)
            last = max(stamps)
            sighting = Sighting(entity_id, clip.clip_index, min(stamps), last, self.place_at(clip.path, last))
            self.sightings.setdefault(entity_id, []).append(sighting)
            writer.add_sighting(sighting)
            writer.save_entity(record)
