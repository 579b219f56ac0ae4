"""Builders of perception evidence for tests: deterministic unit embeddings per identity."""

from __future__ import annotations

import numpy as np

from m3_memory.graph.records import (
    ClipEvidence,
    FaceEvidence,
    MatchEvidence,
    ObjectEvidence,
    TextEvidence,
    VoiceEvidence,
)

S = 1_000_000_000


def unit(seed: int, dim: int) -> list[float]:
    vector = np.random.default_rng(seed).normal(size=dim)
    return list(vector / np.linalg.norm(vector))


def face(face_id: str, t: float, seed: int | None = None, crop: bytes = b"", quality: float = 0.5) -> FaceEvidence:
    seed = int(face_id.split("_")[1]) if seed is None else seed
    return FaceEvidence(face_id, seed, (0.0, 0.0, 50.0, 50.0), 0.9, int(t * S), unit(seed, 128), crop, quality)


def voice(voice_id: str, t0: float, t1: float, text: str, seed: int | None = None) -> VoiceEvidence:
    seed = 1000 + int(voice_id.split("_")[1]) if seed is None else seed
    return VoiceEvidence(voice_id, int(t0 * S), int(t1 * S), text, 0.9, unit(seed, 256), int(t0 * 10))


def match(id1: str, id2: str, t: float, confidence: float = 0.9, count: int = 3) -> MatchEvidence:
    return MatchEvidence(id1, id2, confidence, count, int(t * S), 2, 4)


FAR_BOX = (400.0, 300.0, 60.0, 60.0)  # away from face()'s box and the body under it: nobody holds it


def seen(object_id: str, label: str, t: float, confidence: float = 0.7, box=FAR_BOX) -> ObjectEvidence:
    return ObjectEvidence(object_id, label, confidence, tuple(float(v) for v in box), int(t * S))


def read(region_id: str, text: str, t: float, confidence: float = 0.95) -> TextEvidence:
    return TextEvidence(region_id, text, confidence, (5.0, 300.0, 200.0, 30.0), int(t * S))


def clip(index: int, faces=(), voices=(), matches=(), seconds: float = 30.0, objects=(), texts=()) -> ClipEvidence:
    start = int(index * seconds * S)
    return ClipEvidence(
        index, start, start + int(seconds * S), list(faces), list(voices), list(matches),
        objects=list(objects), texts=list(texts),
    )  # fmt: skip
