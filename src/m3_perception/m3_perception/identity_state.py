"""Perception's identity state as plain data: JSON-able metadata plus named numpy arrays.

A replay that resumes in the middle of a recording must know the people it already knows: the face
and voice identities (exemplars, crops, counts), the face tracker, the face-voice matcher's evidence
and the voice pipeline's open utterance (VAD state, segmenter audio, stream clock). `capture` turns
them into data (no pickle: the arrays go to an .npz read with allow_pickle=False, see state_file);
`restore` puts them back, all or nothing: anything missing or malformed raises StateError before
the pipelines are touched. Models and parameters are not part of the state (the caller checks that
the state was made with the same ones).
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

import numpy as np

from m3_perception.face_voice_matcher import FaceVoiceMatcher
from m3_perception.faces.iou_tracker import IouTracker, Track
from m3_perception.faces.pipeline import FacePipeline
from m3_perception.identity_clusters import IdentityClusters, IdentityState
from m3_perception.voices.face_split import FaceSplit
from m3_perception.voices.pipeline import VoicePipeline
from m3_perception.voices.revision import Turn
from m3_runtime.state_file import StateError

FORMAT = "m3-perception-identity-state"
VERSION = 2


class Arrays:
    """Named arrays of one state; metadata refers to them by key."""

    def __init__(self, arrays: dict[str, np.ndarray] | None = None) -> None:
        self.arrays: dict[str, np.ndarray] = dict(arrays or {})

    def put(self, value: np.ndarray | bytes) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = np.frombuffer(value, np.uint8) if isinstance(value, bytes) else np.asarray(value)
        return key

    def get(self, key: str, dtype: Any = np.floating) -> np.ndarray:
        """The array `key`, of the kind `dtype` (a numpy type or abstract kind such as np.floating)."""
        array = self.arrays[key]
        if not np.issubdtype(array.dtype, dtype):
            raise StateError(
                f"array {key} is {array.dtype}, expected {np.dtype(dtype) if dtype is not np.floating else 'floats'}"
            )
        return array

    def bytes(self, key: str) -> bytes:
        return self.get(key, np.uint8).tobytes()


def _clusters(c: IdentityClusters, out: Arrays) -> list[dict]:
    return [
        {
            "id": i.id,
            "first_seen": i.first_seen,
            "last_seen": i.last_seen,
            "count": i.observation_count,
            "exemplars": [out.put(e) for e in i.exemplars],
            "crops": [[float(q), out.put(j)] for q, j in i.crops],
            "merged_into": i.merged_into,
        }
        for i in c.identities.values()
    ]


def _load_clusters(template: IdentityClusters, data: list[dict], arrays: Arrays) -> IdentityClusters:
    c = IdentityClusters(template.prefix, template.max_distance, template.max_exemplars, template.max_crops)
    c.centroid = template.centroid
    for d in data:
        ident = IdentityState(str(d["id"]), float(d["first_seen"]), float(d["last_seen"]), int(d["count"]))
        ident.exemplars = [arrays.get(k) for k in d["exemplars"]]
        ident.crops = [(float(q), arrays.bytes(k)) for q, k in d["crops"]]
        ident.merged_into = str(d["merged_into"])
        c.identities[ident.id] = ident
    return c


def _faces(f: FacePipeline, out: Arrays) -> dict:
    tracks = [
        {
            "id": t.track_id,
            "box": [float(v) for v in t.box],
            "last_seen": t.last_seen,
            "hits": t.hits,
            "since_embed": t.frames_since_embed,
            "thumb": None if t.thumb is None else out.put(t.thumb),
        }
        for t in f.tracker.tracks.values()
    ]
    pending = [[tid, [[out.put(e), float(q), out.put(j)] for e, q, j in seen]] for tid, seen in f.pending.items()]
    return {
        "tracks": tracks,
        "next_track": f.tracker._next_id,
        "clusters": _clusters(f.clusters, out),
        "track_ids": [[tid, fid] for tid, fid in f.track_ids.items()],
        "pending": pending,
    }


def _load_faces(f: FacePipeline, d: dict, a: Arrays) -> dict[str, Any]:
    tracker = IouTracker(f.tracker.min_iou, f.tracker.max_age_s)
    for t in d["tracks"]:
        thumb = None if t["thumb"] is None else a.get(t["thumb"])
        box = tuple(float(v) for v in t["box"])
        if len(box) != 4:
            raise StateError(f"track box {box} is not (x, y, w, h)")
        tracker.tracks[int(t["id"])] = Track(
            int(t["id"]), box, float(t["last_seen"]), int(t["hits"]), int(t["since_embed"]), thumb
        )
    tracker._next_id = int(d["next_track"])
    pending = {int(tid): [(a.get(e), float(q), a.bytes(j)) for e, q, j in seen] for tid, seen in d["pending"]}
    return {
        "tracker": tracker,
        "clusters": _load_clusters(f.clusters, d["clusters"], a),
        "track_ids": {int(tid): str(fid) for tid, fid in d["track_ids"]},
        "pending": pending,
    }


def _voices(v: VoicePipeline, out: Arrays) -> dict:
    s = v.segmenter
    return {
        "segmenter": {
            "pending": out.put(s._pending),
            "pos": s._pos,
            "history": out.put(s._history),
            "hist_start": s._hist_start,
            "speech_start": s._speech_start,
            "last_voiced": s._last_voiced,
        },
        "probs": out.put(np.asarray(v._probs, np.float64)),
        "probs_end": v._probs_end,
        "clusters": _clusters(v.clusters, out),
        "clock": {"anchors": [[i, t] for i, t in v.clock._anchors], "samples": v.clock.samples},
        "next_segment": v._next_segment,
        "vad": {"state": out.put(v.vad._state), "context": out.put(v.vad._context)},
        "revision": {
            "next_at": v.reviser.next_at,
            "turns": [
                [t.segment_id, t.voice_id, t.start, t.end, out.put(t.embedding), out.put(t.samples), t.face, *t.flags()]
                for t in v.reviser.turns
            ],
            "face_pairs": [[f, voice, n] for (f, voice), n in v.reviser.faces.state.pairs.items()],
            "face_voice": v.reviser.faces.state.face_voice,
            "group": v.reviser.faces.state.group,
        },
    }


def _load_voices(v: VoicePipeline, d: dict, a: Arrays) -> dict[str, Any]:
    s = d["segmenter"]
    speech_start = s["speech_start"]
    vad_state, vad_context = a.get(d["vad"]["state"], np.float32), a.get(d["vad"]["context"], np.float32)
    if vad_state.shape != v.vad._state.shape or vad_context.shape != v.vad._context.shape:
        raise StateError(f"VAD state of shape {vad_state.shape}/{vad_context.shape} is not this model's")
    return {
        "segmenter": {
            "_pending": a.get(s["pending"], np.float32),
            "_pos": int(s["pos"]),
            "_history": a.get(s["history"], np.float32),
            "_hist_start": int(s["hist_start"]),
            "_speech_start": None if speech_start is None else int(speech_start),
            "_last_voiced": int(s["last_voiced"]),
        },
        "probs": deque((float(p) for p in a.get(d["probs"], np.float64)), maxlen=v._probs.maxlen),
        "probs_end": int(d["probs_end"]),
        "clusters": _load_clusters(v.clusters, d["clusters"], a),
        "anchors": [(int(i), float(t)) for i, t in d["clock"]["anchors"]],
        "samples": int(d["clock"]["samples"]),
        "next_segment": int(d["next_segment"]),
        "vad": (vad_state, vad_context),
        "next_at": None if d["revision"]["next_at"] is None else float(d["revision"]["next_at"]),
        "turns": [
            Turn(
                int(seg), str(voice), float(t0), float(t1), a.get(e), a.get(x, np.float32), *map(bool, flags), str(face)
            )
            for seg, voice, t0, t1, e, x, face, *flags in d["revision"]["turns"]
        ],
        "faces": FaceSplit(
            Counter({(str(f), str(voice)): int(n) for f, voice, n in d["revision"]["face_pairs"]}),
            {str(k): str(x) for k, x in d["revision"]["face_voice"].items()},
            {str(k): str(x) for k, x in d["revision"]["group"].items()},
        ),
    }


def _matcher(m: FaceVoiceMatcher) -> dict:
    return {
        "frames": [[t, f] for t, f in m._frames],
        "pairs": [[face, voice, n] for (face, voice), n in m.pairs.items()],
        "voice_utterances": list(m.voice_utterances.items()),
    }


def _load_matcher(d: dict) -> dict[str, Any]:
    return {
        "frames": deque((float(t), None if f is None else str(f)) for t, f in d["frames"]),
        "pairs": Counter({(str(face), str(voice)): int(n) for face, voice, n in d["pairs"]}),
        "voice_utterances": Counter({str(k): int(n) for k, n in d["voice_utterances"]}),
    }


def capture(
    faces: FacePipeline, voices: VoicePipeline, matcher: FaceVoiceMatcher
) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, arrays) of the pipelines' identity state; copies, so the pipelines may go on."""
    out = Arrays()
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "faces": _faces(faces, out),
        "voices": _voices(voices, out),
        "matcher": _matcher(matcher),
    }
    return meta, {k: np.array(v, copy=True) for k, v in out.arrays.items()}


def restore(
    faces: FacePipeline, voices: VoicePipeline, matcher: FaceVoiceMatcher, meta: dict, arrays: dict[str, np.ndarray]
) -> None:
    """Put a captured state back into freshly built pipelines; StateError (nothing changed) when it
    is not a state of this format and version or is malformed."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise StateError("not a perception identity state")
    if meta.get("version") != VERSION:
        raise StateError(f"perception identity state version {meta.get('version')!r}, this version reads {VERSION}")
    a = Arrays(arrays)
    try:
        f = _load_faces(faces, meta["faces"], a)
        v = _load_voices(voices, meta["voices"], a)
        m = _load_matcher(meta["matcher"])
    except StateError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise StateError(f"malformed perception identity state ({type(error).__name__}: {error})") from error
    faces.tracker, faces.clusters, faces.track_ids, faces.pending = (
        f["tracker"],
        f["clusters"],
        f["track_ids"],
        f["pending"],
    )
    for name, value in v["segmenter"].items():
        setattr(voices.segmenter, name, value)
    voices._probs, voices._probs_end, voices.clusters = v["probs"], v["probs_end"], v["clusters"]
    voices.clock._anchors, voices.clock.samples, voices._next_segment = v["anchors"], v["samples"], v["next_segment"]
    voices.vad._state, voices.vad._context = v["vad"]
    voices.reviser.clusters, voices.reviser.turns, voices.reviser.next_at = v["clusters"], v["turns"], v["next_at"]
    voices.reviser.faces.state = v["faces"]
    matcher._frames, matcher.pairs, matcher.voice_utterances = m["frames"], m["pairs"], m["voice_utterances"]
