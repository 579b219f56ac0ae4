"""Episode scripts: their lines, their validation, and the timeline the lines make.

A scene line is `[person, text]` (the original form) or `[person, text, {gap: SECONDS}]`: its own
silence before it, measured from the previous line's end. `gap: 0` is a back-to-back turn; a
negative gap starts the line before the previous one ends (overlapping speech, mixed in the audio).
Without `gap` a line follows the script's `gap_s`, exactly as the original generator laid it out,
so old scripts keep their timings sample for sample.

People: a person without `photo` is only heard (never drawn); a person who speaks while not in the
scene's `present` is off-camera for that line. `named: false` marks a person whose name is never
said or given in the episode (a benchmark must not count that name as missing); `spellings` lists
other ways to write a name (Sofia: [Sophia]) that a benchmark accepts as that name.

Things (optional): a scene's `things` are objects and notes the camera sees (demo/things.py); a question
with `seen: true` is one only seeing answers (`m3 bench replay` counts them apart).

Places (optional): `places` names the regions of the home in the memory node's regions-file format,
and every scene then says where the robot is (`place: kitchen`); demo/places.py turns that into a
regions file and a pose path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from m3_agent.demo.things import validate_things

AUDIO_RATE_HZ = 16000
QUESTION_TYPES = (
    "Multi-Detail Reasoning",
    "Multi-Hop Reasoning",
    "Cross-Modal Reasoning",
    "Person Understanding",
    "General Knowledge Extraction",
)


@dataclass
class Utterance:
    person: str
    text: str
    start_s: float
    end_s: float


@dataclass
class Scene:
    present: list[str]
    start_s: float
    end_s: float
    place: str = ""  # where the robot is during the scene: a region of the script's `places` ("" = none)
    things: list[dict] = field(default_factory=list)  # what else the camera sees (demo/things.py)


@dataclass
class EpisodeTruth:
    episode_id: str
    duration_s: float
    people: dict[str, dict]
    utterances: list[Utterance] = field(default_factory=list)
    scenes: list[Scene] = field(default_factory=list)


@dataclass(frozen=True)
class Line:
    person: str
    text: str
    gap_s: float | None  # None: the script's gap_s after the previous line, as the original layout


def name_spellings(people: dict) -> list[list[str]]:
    """Each person's name with its other spellings (`people` of a script or of its truth file): what a
    judge accepts as that name in an answer."""
    return [[spec["name"], *spec.get("spellings", [])] for spec in people.values() if spec.get("name")]


def episode_judge(truth_file: str | Path):
    """(judge, method) for an episode's answers: the normalised match, taking a name of the truth in any
    spelling the truth file lists for that person (judge.with_spellings)."""
    from m3_control.judge import make_judge, with_spellings

    judge, method = make_judge("", "", 0.0, "")
    people = json.loads(Path(truth_file).read_text())["people"]
    return with_spellings(judge, name_spellings(people)), method


def place_key(name: object) -> str:
    """A place name as regions match it: case-folded, runs of whitespace as one space."""
    return " ".join(str(name).split()).casefold()


def scene_lines(scene: dict) -> list[Line]:
    """A scene's lines in either form; an unknown line option is an error, not ignored."""
    out = []
    for item in scene["lines"]:
        if not isinstance(item, list | tuple) or len(item) not in (2, 3):
            raise ValueError(f"a line is [person, text] or [person, text, {{gap: s}}], got {item!r}")
        options = dict(item[2]) if len(item) == 3 else {}
        unknown = set(options) - {"gap"}
        if unknown:
            raise ValueError(f"unknown line option(s) {sorted(unknown)} in {item!r}: only 'gap' is known")
        gap = options.get("gap")
        out.append(Line(str(item[0]), str(item[1]), None if gap is None else float(gap)))
    return out


def all_lines(script: dict) -> list[tuple[int, int, Line]]:
    """(scene index, line index, line) in script order: the order of the voices and of `after:S.L`."""
    return [(si, li, line) for si, scene in enumerate(script["scenes"]) for li, line in enumerate(scene_lines(scene))]


def validate(script: dict) -> list[str]:
    """Problems with a script (empty: fine): unknown people, photos shared, bad questions."""
    problems: list[str] = []
    people = script.get("people") or {}
    for key in ("episode_id", "fps", "width", "height", "scenes", "questions"):
        if key not in script:
            problems.append(f"missing {key!r}")
    photos: dict[str, str] = {}
    for person, spec in people.items():
        if not spec.get("voice"):
            problems.append(f"{person}: no voice")
        if "named" in spec and not isinstance(spec["named"], bool):
            problems.append(f"{person}: named must be true or false")
        if not isinstance(spec.get("spellings", []), list):
            problems.append(f"{person}: spellings must be a list of the name's other spellings")
        if spec.get("photo"):
            key = f"{spec['photo']}:{spec.get('crop')}"
            if key in photos:
                problems.append(f"{person} and {photos[key]} share one photograph and crop")
            photos[key] = person
    try:
        lines = all_lines(script)
    except (ValueError, KeyError, TypeError) as error:
        return [*problems, f"lines: {error}"]
    places = script.get("places")
    if places is not None and not (isinstance(places, dict) and isinstance(places.get("regions"), dict)):
        problems.append("places must be a regions file's mapping: {frame_id: map, regions: {name: shape}}")
        places = None
    names = {place_key(name) for name in (places or {}).get("regions", {})}
    for si, scene in enumerate(script.get("scenes", [])):
        if "place" in scene and places is None:
            problems.append(f"scene {si}: place {scene['place']!r} but the script has no places")
        elif places is not None and place_key(scene.get("place", "")) not in names:
            problems.append(f"scene {si}: place {scene.get('place')!r} is not one of places (every scene needs one)")
        for person in scene.get("present", []):
            if person not in people:
                problems.append(f"scene {si}: present {person!r} is not in people")
            elif not people[person].get("photo"):
                problems.append(f"scene {si}: {person!r} has no photo, so cannot be present (seen)")
        for li, line in enumerate(scene_lines(scene)):
            if line.person not in people:
                problems.append(f"line {si}.{li}: speaker {line.person!r} is not in people")
            if line.gap_s is not None and line.gap_s < 0 and li == 0:
                problems.append(f"line {si}.{li}: the first line of a scene cannot overlap (negative gap)")
    problems += validate_things(script)
    refs = {f"after:{si}.{li}" for si, li, _ in lines}
    for number, q in enumerate(script.get("questions", []), start=1):
        if not q.get("q") or not str(q.get("a", "")).strip():
            problems.append(f"question {number}: needs q and a")
        if q.get("at") != "end" and q.get("at") not in refs:
            problems.append(f"question {number}: at {q.get('at')!r} is neither 'end' nor a line after:S.L")
        if not isinstance(q.get("seen", False), bool):
            problems.append(f"question {number}: seen must be true or false")
        unknown = [t for t in q.get("type", []) if t not in QUESTION_TYPES]
        if unknown or not q.get("type"):
            problems.append(f"question {number}: type {q.get('type')!r} is not a list of {QUESTION_TYPES}")
    return problems


def plan_episode(script: dict, voices: dict[str, list[np.ndarray]]) -> tuple[EpisodeTruth, np.ndarray]:
    """Lay the lines out on one timeline; voices[person] holds each line's audio in script order.

    Time (float seconds) and position (samples) are advanced the way the original concatenation
    did, so a script without line gaps gives the same truth and the same samples as before."""
    gap_s = float(script.get("gap_s", 1.0))
    truth = EpisodeTruth(script["episode_id"], 0.0, script["people"])
    placed: list[tuple[int, np.ndarray]] = []
    taken = {person: 0 for person in script["people"]}
    t, n = 0.0, 0  # the cursor: the end of everything so far, trailing gap included
    last_end: tuple[float, int] | None = None  # the previous line's end

    def after(seconds: float, base: tuple[float, int]) -> tuple[float, int]:
        return base[0] + seconds, base[1] + round(seconds * AUDIO_RATE_HZ)

    for scene in script["scenes"]:
        scene_start = (t, n)
        t, n = after(float(scene.get("silent_s", 0.0)) + gap_s, (t, n))
        for li, line in enumerate(scene_lines(scene)):
            audio = voices[line.person][taken[line.person]]
            taken[line.person] += 1
            if line.gap_s is None:
                start = (t, n)
            elif li == 0 or last_end is None:  # the line's own gap replaces the scene's leading gap_s
                start = after(float(scene.get("silent_s", 0.0)) + line.gap_s, scene_start)
            else:
                start = after(line.gap_s, last_end)
                if start[1] < 0:
                    raise ValueError(f"line {line.text!r} would start before the episode")
            end = (start[0] + len(audio) / AUDIO_RATE_HZ, start[1] + len(audio))
            truth.utterances.append(Utterance(line.person, line.text, round(start[0], 3), round(end[0], 3)))
            placed.append((start[1], audio))
            last_end = end
            if end[1] + round(gap_s * AUDIO_RATE_HZ) >= n:
                t, n = after(gap_s, end)
        truth.scenes.append(
            Scene(
                list(scene["present"]),
                round(scene_start[0], 3),
                round(t, 3),
                str(scene.get("place", "")),
                [dict(thing) for thing in scene.get("things", [])],
            )
        )
    truth.duration_s = round(t, 3)
    mixed = np.zeros(n, np.float32)
    for offset, audio in placed:
        mixed[offset : offset + len(audio)] += audio
    return truth, mixed
