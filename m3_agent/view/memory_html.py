"""Render a memory export (MemoryStore.export_json) as one self-contained HTML page.

The page shows people with their faces, voices and names; the things seen (objects with their best crop,
written text with its reading) with where the robot last saw them; every clip on a timeline with its
episodic and semantic memories (where each happened, and which were replaced by a newer statement, with
when); a map of the robot's path and the memories' places when poses were recorded; and, when given, the
answers of an evaluation with links to the memories that support them. Entity tags such as <face_2> are
rendered as the person's name.
"""

from __future__ import annotations

import re
from collections import defaultdict
from importlib import resources
from pathlib import Path

import jinja2

TAG = re.compile(r"<((?:face|voice|person)_\d+)>")


def _ns_to_clock(ns: int) -> str:
    seconds = max(0, int(ns // 1_000_000_000))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


class _Names:
    """Entity id → display name (the person's learnt name, else the person or entity id)."""

    def __init__(self, export: dict) -> None:
        self._alias = {a["old_id"]: a["new_id"] for a in export.get("aliases", [])}
        self._entities = {e["entity_id"]: e for e in export.get("entities", [])}

    def resolve(self, entity_id: str) -> str:
        seen = set()
        while entity_id in self._alias and entity_id not in seen:
            seen.add(entity_id)
            entity_id = self._alias[entity_id]
        return entity_id

    def person_of(self, entity_id: str) -> str:
        entity = self._entities.get(self.resolve(entity_id), {})
        if entity.get("kind") == "person":
            return entity["entity_id"]
        return entity.get("person_id") or self.resolve(entity_id)

    def display(self, entity_id: str) -> str:
        person = self._entities.get(self.person_of(entity_id), {})
        return person.get("name") or self.person_of(entity_id)


def _people(export: dict, names: _Names) -> list[dict]:
    members: dict[str, list[dict]] = defaultdict(list)
    persons = []
    for entity in export.get("entities", []):
        if entity["kind"] == "person":
            persons.append(entity)
        elif entity.get("person_id"):
            members[entity["person_id"]].append(entity)
    grouped = set()
    people = []
    for person in persons:
        faces = [m for m in members[person["entity_id"]] if m["kind"] == "face"]
        voices = [m for m in members[person["entity_id"]] if m["kind"] == "voice"]
        grouped.update(m["entity_id"] for m in faces + voices)
        crop = next((f["crop_jpeg"] for f in faces if f.get("crop_jpeg")), person.get("crop_jpeg"))
        people.append(
            {
                "id": person["entity_id"],
                "name": names.display(person["entity_id"]),
                "faces": faces,
                "voices": voices,
                "crop": crop,
                "first_clip": person.get("first_clip", -1),
            }
        )
    for entity in export.get("entities", []):
        if (
            entity["kind"] in ("face", "voice")
            and entity["entity_id"] not in grouped
            and entity["entity_id"] == names.resolve(entity["entity_id"])
        ):
            is_face = entity["kind"] == "face"
            people.append(
                {
                    "id": entity["entity_id"],
                    "name": names.display(entity["entity_id"]),
                    "faces": [entity] if is_face else [],
                    "voices": [] if is_face else [entity],
                    "crop": entity.get("crop_jpeg"),
                    "first_clip": entity.get("first_clip", -1),
                }
            )
    return people


def _things(export: dict) -> list[dict]:
    """Objects and written text seen (their entities: label, crop, first and last clip), each with where the
    robot was when it last saw it and how many memories are about it (the edges name things, tags do not)."""
    last_seen: dict[str, dict] = {}
    for sighting in export.get("sightings", []):
        if sighting["entity_id"] not in last_seen or sighting["last_ns"] >= last_seen[sighting["entity_id"]]["last_ns"]:
            last_seen[sighting["entity_id"]] = sighting
    memories: dict[str, int] = defaultdict(int)
    for edge in export.get("edges", []):
        memories[edge["entity_id"]] += 1
    return [
        {
            "id": entity["entity_id"],
            "kind": entity["kind"],
            "label": entity.get("label", ""),
            "crop": entity.get("crop_jpeg"),
            "first_clip": entity.get("first_clip", -1),
            "last_clip": entity.get("last_clip", -1),
            "seen": entity.get("observation_count", 0),
            "where": _where_seen(last_seen.get(entity["entity_id"])),
            "memories": memories[entity["entity_id"]],
        }
        for entity in export.get("entities", [])
        if entity["kind"] in ("object", "text")
    ]


MAP_W, MAP_H, MAP_MARGIN = 640, 420, 20  # the map's drawing size [px]


def _map(export: dict) -> dict | None:
    """The robot's path (clip_paths) and the memories' places (text_places) scaled into the map's pixels, the
    y axis up as on a map; None when no pose was recorded."""
    places, paths = export.get("text_places", []), export.get("clip_paths", [])
    points = [(p["x"], p["y"]) for p in places] + [(p["x"], p["y"]) for p in paths]
    if not points:
        return None
    xs, ys = [x for x, _ in points], [y for _, y in points]
    span = max(max(xs) - min(xs), max(ys) - min(ys), 1.0)
    scale = min(MAP_W, MAP_H) - 2 * MAP_MARGIN

    def pixel(x: float, y: float) -> tuple[float, float]:
        return (
            round(MAP_MARGIN + (x - min(xs)) / span * scale, 1),
            round(MAP_H - MAP_MARGIN - (y - min(ys)) / span * scale, 1),
        )

    by_clip: dict[int, list[dict]] = defaultdict(list)
    for sample in sorted(paths, key=lambda p: (p["clip_index"], p["stamp_ns"])):
        by_clip[sample["clip_index"]].append(sample)
    path = " ".join(f"{px},{py}" for c in sorted(by_clip) for px, py in (pixel(s["x"], s["y"]) for s in by_clip[c]))
    marks = [
        {"id": p["node_id"], "px": pixel(p["x"], p["y"]), "label": p["region"] or f"({p['x']:.1f}, {p['y']:.1f})"}
        for p in places
    ]
    return {"width": MAP_W, "height": MAP_H, "path": path, "marks": marks, "metres": round(span, 1)}


def _timeline(export: dict, names: _Names) -> list[dict]:
    places = {p["node_id"]: p for p in export.get("text_places", [])}
    seen: dict[str, list[str]] = defaultdict(list)  # memory → the things it is about
    kinds = {e["entity_id"]: e["kind"] for e in export.get("entities", [])}
    for edge in export.get("edges", []):
        if kinds.get(edge["entity_id"]) in ("object", "text"):
            seen[edge["node_id"]].append(edge["entity_id"])
    validity = {v["node_id"]: v for v in export.get("validity", [])}
    by_clip: dict[int, list[dict]] = defaultdict(list)
    for node in export.get("text_nodes", []):
        by_clip[node["clip_index"]].append(node)
    clips = []
    for clip in export.get("clips", []):
        memories = []
        for node in sorted(by_clip[clip["clip_index"]], key=lambda n: (n["kind"] != "episodic", n["start_ns"])):
            text = TAG.sub(lambda m: f"\x00{m.group(1)}\x01", node["text"])
            parts = [
                {"entity": names.resolve(piece), "text": names.display(piece)}
                if i % 2
                else {"entity": "", "text": piece}
                for i, piece in enumerate(re.split(r"\x00|\x01", text))
            ]
            memories.append(
                {
                    "id": node["node_id"],
                    "kind": node["kind"],
                    "parts": parts,
                    "things": seen[node["node_id"]],
                    "weight": node["weight"],
                    "at": _ns_to_clock(node["start_ns"] - export["clips"][0]["start_ns"]),
                    "where": _where(places.get(node["node_id"])),
                    "replaced": _replaced(validity.get(node["node_id"]), export["clips"][0]["start_ns"]),
                }
            )
        start0 = export["clips"][0]["start_ns"]
        clips.append(
            {
                "index": clip["clip_index"],
                "start": _ns_to_clock(clip["start_ns"] - start0),
                "end": _ns_to_clock(clip["end_ns"] - start0),
                "keyframe": clip.get("keyframe_jpeg"),
                "memories": memories,
            }
        )
    return clips


def _where(place: dict | None) -> str:
    if place is None:
        return ""
    return place["region"] or f"({place['x']:.1f}, {place['y']:.1f}) in {place['frame_id']}"


def _where_seen(sighting: dict | None) -> str:
    """Where the robot was at a sighting; "" when no pose was recorded (its place columns are NULL)."""
    if sighting is None or sighting.get("frame_id") is None:
        return ""
    return _where({"region": sighting.get("region") or "", **{k: sighting[k] for k in ("x", "y", "frame_id")}})


def _replaced(valid: dict | None, start0: int) -> dict | None:
    """When and by what a memory's statement was replaced (its validity interval ends then)."""
    if valid is None:
        return None
    return {"by": valid["superseded_by"], "at": _ns_to_clock(valid["valid_until_ns"] - start0)}


def render(export: dict, answers: list[dict] | None = None, title: str = "m3 memory") -> str:
    """answers: dicts with question, answer, ground_truth, verdict, evidence (node ids), type."""
    names = _Names(export)
    template = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
        resources.files("m3_agent.view").joinpath("memory.html.j2").read_text()
    )
    known = {node["node_id"] for node in export.get("text_nodes", [])}
    return template.render(
        title=title,
        people=_people(export, names),
        things=_things(export),
        clips=_timeline(export, names),
        map=_map(export),
        answers=[{**a, "evidence": [e for e in a.get("evidence", []) if e in known]} for a in answers or []],
        counts={
            kind: sum(1 for n in export.get("text_nodes", []) if n["kind"] == kind) for kind in ("episodic", "semantic")
        },
    )


def write(export: dict, path: str | Path, answers: list[dict] | None = None, title: str = "m3 memory") -> Path:
    path = Path(path)
    path.write_text(render(export, answers, title), encoding="utf-8")
    return path.resolve()
