"""Identity figures of one episode: who spoke when, which face goes with which voice, which names stuck.

Pure logic (numpy, no ROS, no memory store): `m3 bench identity` reads the memory into a
`MemoryIdentity` and the episode's truth.json, and these functions score one against the other.

Matching a memory entity to a true person:
- voices by time: a voice id belongs to the true speaker whose solo speech (nobody else speaking at the
  time) its segments overlap most; a true speaker's voice is the id covering most of their solo speech.
- faces by appearance: every person drawn in the episode is photographed, so a face id belongs to the
  person whose photo embedding is nearest its stored embeddings (presence cannot tell apart two people
  who are always on screen together); a person's face is the most observed face id matched to them.
The memory person of a true person is the person of their voice (names are learnt from speech), else of
their face.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

Segment = tuple[float, float, str]  # (start s, end s, label)
COLLAR_S = 0.25
MIN_ASSIGNED_S = 0.3  # a voice id counts for a true speaker once it covers this much of their solo speech


@dataclass
class MemoryIdentity:
    """What the memory concluded, with every id already resolved through the memory's aliases."""

    voice_segments: list[Segment]  # (start s, end s, voice id) on the episode's clock
    person_of: dict[str, str]  # face/voice id -> person id
    names: dict[str, str]  # person id -> its name ("" = none)
    face_of: dict[str, str] = field(default_factory=dict)  # true person -> face id (by photo embedding)


def _minus(start: float, end: float, holes: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """[start, end) with the holes taken out."""
    pieces = [(start, end)]
    for a, b in holes:
        pieces = [p for s, e in pieces for p in ((s, min(e, a)), (max(s, b), e)) if p[1] - p[0] > 1e-9]
    return pieces


def reference_segments(truth: dict) -> list[Segment]:
    return [(float(u["start_s"]), float(u["end_s"]), u["person"]) for u in truth["utterances"]]


def diarization_error(truth: dict, voice_segments: Sequence[Segment], collar: float = COLLAR_S) -> tuple[float, float]:
    """(DER, scored speech seconds): m3_perception.material.metrics.der, ±collar around reference boundaries
    unscored, overlapped speech scored."""
    from m3_perception.material.metrics import der

    result = der(reference_segments(truth), list(voice_segments), collar=collar)
    return result.der, result.speech_s


def _solo(reference: Sequence[Segment]) -> list[Segment]:
    """Each speaker's speech minus the times anyone else speaks."""
    return [
        (s, e, who)
        for start, end, who in reference
        for s, e in _minus(start, end, [(a, b) for a, b, w in reference if w != who])
    ]


def voice_overlap(truth: dict, voice_segments: Sequence[Segment]) -> dict[str, dict[str, float]]:
    """true speaker -> voice id -> seconds of that speaker's solo speech the id's segments cover."""
    table: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s, e, who in _solo(reference_segments(truth)):
        for a, b, voice in voice_segments:
            if (covered := min(e, b) - max(s, a)) > 0:
                table[who][voice] += covered
    return {who: dict(row) for who, row in table.items()}


def voice_ids_per_speaker(truth: dict, voice_segments: Sequence[Segment]) -> float:
    """Mean over true speakers of the distinct voice ids covering ≥ MIN_ASSIGNED_S of their solo speech."""
    table = voice_overlap(truth, voice_segments)
    speakers = sorted({u["person"] for u in truth["utterances"]})
    counts = [sum(1 for seconds in table.get(p, {}).values() if seconds >= MIN_ASSIGNED_S) for p in speakers]
    return float(np.mean(counts)) if counts else 0.0


def speakers_per_voice(truth: dict, voice_segments: Sequence[Segment]) -> float:
    """Mean over voice ids of the true speakers whose solo speech each covers ≥ MIN_ASSIGNED_S: above 1
    when voices are merged (two people under one id), which voice_ids_per_speaker cannot show."""
    per_voice: dict[str, int] = defaultdict(int)
    for row in voice_overlap(truth, voice_segments).values():
        for voice, seconds in row.items():
            if seconds >= MIN_ASSIGNED_S:
                per_voice[voice] += 1
    return float(np.mean(list(per_voice.values()))) if per_voice else 0.0


def voice_of_people(truth: dict, voice_segments: Sequence[Segment]) -> dict[str, str]:
    """true speaker -> the voice id covering most of their solo speech (absent: never heard as any voice)."""
    return {who: max(row, key=lambda v: (row[v], v)) for who, row in voice_overlap(truth, voice_segments).items()}


def match_faces(
    photo_vectors: dict[str, np.ndarray], face_vectors: dict[str, list[np.ndarray]], face_counts: dict[str, int]
) -> dict[str, str]:
    """true person -> face id: each face id goes to the person whose photo is nearest (cosine) its mean
    stored embedding; each person keeps the most observed of their face ids."""

    def unit(v: np.ndarray) -> np.ndarray:
        return v / max(float(np.linalg.norm(v)), 1e-12)

    people = sorted(photo_vectors)
    if not people:
        return {}
    photos = np.stack([unit(np.asarray(photo_vectors[p], np.float64)) for p in people])
    best: dict[str, tuple[int, str]] = {}
    for face, vectors in face_vectors.items():
        if not vectors:
            continue
        centroid = unit(np.mean([unit(np.asarray(v, np.float64)) for v in vectors], axis=0))
        person = people[int(np.argmax(photos @ centroid))]
        key = (face_counts.get(face, 0), face)
        if person not in best or key > best[person]:
            best[person] = key
    return {person: face for person, (_, face) in best.items()}


def spellings(person: dict) -> set[str]:
    """A person's name and its other spellings (`spellings` in the script: Sofia, Sophia), lower case:
    speech recognition writes a spoken name one way, and every way of writing it is that name."""
    return {str(n).strip().lower() for n in [person["name"], *person.get("spellings", [])]}


def identity_figures(truth: dict, memory: MemoryIdentity) -> dict:
    """The episode's identity figures (see `m3 bench identity`) and, per true person, what was found."""
    people: dict[str, dict] = truth["people"]
    voices = voice_of_people(truth, memory.voice_segments)
    seen = {p for scene in truth["scenes"] for p in scene["present"] if people[p].get("photo")}
    heard = {u["person"] for u in truth["utterances"]}
    der_value, speech_s = diarization_error(truth, memory.voice_segments)
    detail, person_of_true = {}, {}
    bound = bindable = 0
    for who in sorted(people):
        voice, face = voices.get(who, ""), memory.face_of.get(who, "")
        person = memory.person_of.get(voice, "") or memory.person_of.get(face, "")
        person_of_true[who] = person
        row = {"voice": voice, "face": face, "person": person, "name": memory.names.get(person, "")}
        if who in seen and who in heard:
            bindable += 1
            row["bound"] = bool(voice and face and memory.person_of.get(voice) == memory.person_of.get(face))
            bound += row["bound"]
        detail[who] = row
    named = {w for w, spec in people.items() if spec.get("named", True)}
    true_names = {n for w in named for n in spellings(people[w])}
    right = missing = wrong = 0
    for who in sorted(named):
        got = detail[who]["name"].strip().lower()
        if not got:
            missing += 1
        elif got in spellings(people[who]):
            right += 1
        else:
            wrong += 1
    unnamed_persons = {person_of_true[w] for w in people if w not in named and person_of_true[w]}
    invented = sum(
        1
        for person, name in memory.names.items()
        if name.strip() and (person in unnamed_persons or name.strip().lower() not in true_names)
    )
    return {
        "der": round(der_value, 4),
        "speech_s": round(speech_s, 2),
        "voice_ids_per_speaker": round(voice_ids_per_speaker(truth, memory.voice_segments), 3),
        "speakers_per_voice": round(speakers_per_voice(truth, memory.voice_segments), 3),
        "binding_accuracy": round(bound / bindable, 4) if bindable else None,
        "bindable": bindable,
        "names_right": round(right / len(named), 4) if named else None,
        "named_people": len(named),
        "names_missing": missing,
        "names_wrong": wrong,
        "names_invented": invented,
        "people": detail,
    }
