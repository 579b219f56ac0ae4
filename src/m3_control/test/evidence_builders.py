"""Perception evidence for the tests that build a real m3_memory Memory: unit embeddings per identity."""

from __future__ import annotations

import numpy as np

from m3_memory.graph.records import FaceEvidence, VoiceEvidence

S = 1_000_000_000


def unit(seed: int, dim: int) -> list[float]:
    vector = np.random.default_rng(seed).normal(size=dim)
    return list(vector / np.linalg.norm(vector))


def face(face_id: str, t: float) -> FaceEvidence:
    """face_N seen at t seconds, box (0, 0, 50, 50)."""
    seed = int(face_id.split("_")[1])
    return FaceEvidence(face_id, seed, (0.0, 0.0, 50.0, 50.0), 0.9, int(t * S), unit(seed, 128), b"", 0.5)


def voice(voice_id: str, t0: float, t1: float, text: str) -> VoiceEvidence:
    seed = 1000 + int(voice_id.split("_")[1])
    return VoiceEvidence(voice_id, int(t0 * S), int(t1 * S), text, 0.9, unit(seed, 256), int(t0 * 10))
