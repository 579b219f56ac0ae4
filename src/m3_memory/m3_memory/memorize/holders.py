"""Who holds what (issue 23, part 3), from the boxes of one clip: perception's face boxes (with ids) and
its detector's person and object boxes, all stamped with the image they came from.

In each image a person box is tied to the face whose centre lies in its upper half (no person box for a
face: a body box of human proportions under the face stands in, as the tiny detector misses people).
An object whose centre lies inside a person's box is with that person; of two, the smaller box wins (the
nearer person). Per tracked object, its holder over the clip's images gives events: "picks up" when it
was with nobody and then with a person, "puts down" the other way, "holds" when it was with a person
all along. A change counts once it held for MIN_FRAMES images in a row, so one box off by a frame does
not make a pick-up. From boxes alone, holding is not told apart from standing right behind an object:
the events say what the image shows at the scale of people.
"""

from __future__ import annotations

from dataclasses import dataclass

from m3_memory.graph.records import PEOPLE_LABELS, ClipEvidence, label_of

Box = tuple[float, float, float, float]  # x, y, width, height [px]
MIN_FRAMES = 2  # images in a row a new holder (or none) must hold before it counts
# Faces and objects are found by different workers, which may each skip images: the faces of the image
# nearest in time, within this, stand for the object's image.
SAME_IMAGE_NS = 300_000_000
BODY_WIDTH, BODY_HEIGHT = 3.0, 7.0  # a body box under a face: face widths across, face heights down


@dataclass(frozen=True)
class HolderEvent:
    """A person (memory face id) and an object: "picks up", "holds" or "puts down", when (stream ns)."""

    face_id: str
    object_id: str
    label: str
    kind: str
    stamp_ns: int


def _centre(box: Box) -> tuple[float, float]:
    x, y, w, h = box
    return x + w / 2, y + h / 2


def _inside(point: tuple[float, float], box: Box) -> bool:
    x, y, w, h = box
    return x <= point[0] <= x + w and y <= point[1] <= y + h


def body_of(face: Box) -> Box:
    """A person box standing in for a face with none: human proportions below and around the face."""
    x, y, w, h = face
    return (x + w / 2 - BODY_WIDTH * w / 2, y, BODY_WIDTH * w, BODY_HEIGHT * h)


def people_in_image(faces: list[tuple[str, Box]], persons: list[Box]) -> list[tuple[str, Box]]:
    """(face id, person box) for each face of one image: the person box whose upper half holds the face's
    centre (the smallest such box; each box to one face), else the face's stand-in body box."""
    taken: set[int] = set()
    people = []
    for face_id, face in faces:
        centre = _centre(face)
        fits = [
            (w * h, i) for i, (x, y, w, h) in enumerate(persons) if i not in taken and _inside(centre, (x, y, w, h / 2))
        ]
        if fits:
            _, best = min(fits)
            taken.add(best)
            people.append((face_id, persons[best]))
        else:
            people.append((face_id, body_of(face)))
    return people


def holder_in_image(obj: Box, people: list[tuple[str, Box]]) -> str:
    """The face id of the person whose box holds the object's centre (the smallest box), or ""."""
    centre = _centre(obj)
    fits = [(box[2] * box[3], face_id) for face_id, box in people if _inside(centre, box)]
    return min(fits)[1] if fits else ""


def _events(object_id: str, label: str, holders: list[tuple[int, str]]) -> list[HolderEvent]:
    """Events of one object from its holder per image, in stamp order (module docstring)."""
    events: list[HolderEvent] = []
    state, since, run, run_start = None, 0, "", 0
    count = 0
    for stamp, holder in holders:
        if state is None:  # the first image sets the state
            state, since = holder, stamp
            run, run_start, count = holder, stamp, 1
            continue
        if holder == run:
            count += 1
        else:
            run, run_start, count = holder, stamp, 1
        if run != state and count >= MIN_FRAMES:
            if state:
                events.append(HolderEvent(state, object_id, label, "puts down", run_start))
            if run:
                events.append(HolderEvent(run, object_id, label, "picks up", run_start))
            state, since = run, run_start
    if state and not any(e.face_id == state for e in events):
        events.append(HolderEvent(state, object_id, label, "holds", since))
    return events


def holder_events(clip: ClipEvidence, ids: dict[str, str]) -> list[HolderEvent]:
    """Who picks up, holds and puts down which object in the clip (module docstring), in stamp order;
    face ids are memory ids (`ids`), faces perception has not identified are left out."""
    faces: dict[int, list[tuple[str, Box]]] = {}
    for face in clip.faces:
        if face.face_id in ids:
            faces.setdefault(face.stamp_ns, []).append((ids[face.face_id], face.bbox))
    persons: dict[int, list[Box]] = {}
    objects: dict[str, tuple[str, list[tuple[int, Box]]]] = {}
    for o in sorted(clip.objects, key=lambda o: o.stamp_ns):
        label = label_of(o.label)
        if label in PEOPLE_LABELS:
            persons.setdefault(o.stamp_ns, []).append(o.bbox)
        elif label:
            objects.setdefault(o.object_id, (label, []))[1].append((o.stamp_ns, o.bbox))
    face_stamps = sorted(faces)
    events = []
    for object_id, (label, sightings) in objects.items():
        holders = []
        for stamp, box in sightings:
            near = min(face_stamps, key=lambda t: abs(t - stamp), default=None)
            in_view = faces[near] if near is not None and abs(near - stamp) <= SAME_IMAGE_NS else []
            people = people_in_image(sorted(in_view), persons.get(stamp, []))
            holders.append((stamp, holder_in_image(box, people)))
        events += _events(object_id, label, holders)
    return sorted(events, key=lambda e: (e.stamp_ns, e.face_id, e.object_id))
