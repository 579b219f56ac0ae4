"""Faces over a stream: detect → track → embed on track entry and periodically → face_N ids."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from m3_perception.faces.face_encoder import EMBEDDING_MODEL, FaceEncoder, crop_face, face_quality
from m3_perception.faces.iou_tracker import IouTracker
from m3_perception.identity_clusters import IdentityClusters
from m3_runtime.image_codec import encode_jpeg


def _thumbnail(rgb: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    """16x16 grey thumbnail of the face box, zero-mean unit-variance (cheap appearance signature)."""
    import cv2

    x, y, w, h = (int(v) for v in box)
    crop = rgb[max(0, y) : max(0, y) + max(1, h), max(0, x) : max(0, x) + max(1, w)]
    g = cv2.resize(cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY), (16, 16), interpolation=cv2.INTER_AREA).astype(np.float32)
    g -= g.mean()
    return g / max(float(g.std()), 1e-6)


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return float((a * b).mean())


@dataclass
class FaceObs:
    """One face in one frame, as published in FaceTracks."""

    face_id: str
    track_id: int
    box: tuple[float, float, float, float]
    score: float
    quality: float
    embedding: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    crop_jpeg: bytes = b""
    new_identity: bool = False


@dataclass
class FaceParams:
    match_distance: float = 0.40  # L2 between unit dlib embeddings (≈ dlib raw 0.6); same ≤ 0.2, others ≥ 0.45
    reembed_every_n: int = 10  # re-embed a tracked face every N processed frames
    track_min_iou: float = 0.3
    track_max_age_s: float = 1.0
    max_exemplars: int = 20
    max_crops: int = 3
    send_crops: bool = True  # attach a JPEG crop to embedded observations
    appearance_min_corr: float = 0.6  # a track's face thumbnail correlating less than this forces an embedding
    # A new identity needs this many embeddings, from different frames of one track, that match no
    # known identity (alone or averaged). Until then the track's observations have face_id "" (not
    # published as anyone); a track that matches a known identity gets its id at once.
    confirm_embeddings: int = 2


class FacePipeline:
    """Stateful per-episode face identification; `process` takes one RGB frame and its stream time."""

    def __init__(self, encoder: FaceEncoder, params: FaceParams | None = None) -> None:
        self.encoder = encoder
        self.p = params or FaceParams()
        self.tracker = IouTracker(self.p.track_min_iou, self.p.track_max_age_s)
        self.clusters = IdentityClusters("face", self.p.match_distance, self.p.max_exemplars, self.p.max_crops)
        self.track_ids: dict[int, str] = {}
        self.pending: dict[int, list[tuple[np.ndarray, float, bytes]]] = {}  # track → (embedding, quality, jpeg)
        self.embedding_model = EMBEDDING_MODEL
        self.timings_ms: dict[str, float] = {"face_detect": 0.0, "face_embed": 0.0}  # totals, for the bench

    def process(self, rgb: np.ndarray, stamp: float) -> list[FaceObs]:
        t0 = time.perf_counter()
        dets = self.encoder.detect(rgb)
        self.timings_ms["face_detect"] += (time.perf_counter() - t0) * 1000
        tracked = self.tracker.update([d.box for d in dets], stamp)
        out: list[FaceObs] = []
        for det, (track, is_new) in zip(dets, tracked, strict=True):
            track.frames_since_embed += 1
            thumb = _thumbnail(rgb, det.box)
            # A cut or a person swap at the same place keeps the IoU track alive: a sudden change of
            # appearance forces an embedding, which then decides whether the track is still that person.
            changed = track.thumb is not None and _corr(track.thumb, thumb) < self.p.appearance_min_corr
            track.thumb = thumb
            due = (
                is_new
                or changed
                or track.track_id not in self.track_ids
                or track.frames_since_embed >= self.p.reembed_every_n
            )
            obs = FaceObs("", track.track_id, det.box, det.score, 0.0)
            if due:
                track.frames_since_embed = 0
                t1 = time.perf_counter()
                emb = self.encoder.embed(rgb, det)
                self.timings_ms["face_embed"] += (time.perf_counter() - t1) * 1000
                det.quality = face_quality(rgb, det)
                obs.embedding, obs.quality = emb, det.quality
                jpeg = encode_jpeg(crop_face(rgb, det), 85)
                if self.p.send_crops:
                    obs.crop_jpeg = jpeg
                face_id = self.track_ids.get(track.track_id)
                if face_id is not None and self.clusters.distance(face_id, emb) > self.p.match_distance:
                    # A re-embedding that disagrees: after a change of appearance the tracker followed
                    # someone else, which becomes a new track; without one it is the same face in a
                    # less typical view, which keeps its id but does not become an exemplar.
                    if changed:
                        track = self.tracker.split(track)
                        obs.track_id = track.track_id
                        face_id = None
                    else:
                        self.clusters.observe(face_id, stamp)
                        obs.face_id = face_id
                        out.append(obs)
                        continue
                if face_id is None:
                    face_id, obs.new_identity = self._identify(track.track_id, emb, det.quality, jpeg, stamp)
                else:
                    self.clusters.add_exemplar(self.clusters.identities[face_id], emb)
                    self.clusters.observe(face_id, stamp)
                    self.clusters.add_crop(face_id, det.quality, jpeg)
            else:
                face_id = self.track_ids[track.track_id]
                self.clusters.observe(face_id, stamp)
            obs.face_id = face_id
            out.append(obs)
        for tid in [t for t in self.track_ids if t not in self.tracker.tracks]:
            del self.track_ids[tid]
        for tid in [t for t in self.pending if t not in self.tracker.tracks]:
            del self.pending[tid]  # left before it was confirmed: nobody
        return out

    def _identify(self, track_id: int, emb: np.ndarray, quality: float, jpeg: bytes, stamp: float) -> tuple[str, bool]:
        """Identity of a track that has none yet: a known one, a confirmed new one, or "" (pending)."""
        seen = self.pending.setdefault(track_id, [])
        seen.append((emb, quality, jpeg))
        embs = [e for e, _, _ in seen]
        mean = np.mean(embs, axis=0)
        mean /= max(float(np.linalg.norm(mean)), 1e-12)
        face_id, d = min((self.clusters.nearest(e) for e in [*embs, mean]), key=lambda r: r[1])
        created = False
        if face_id is None or d > self.p.match_distance:
            if len(seen) < self.p.confirm_embeddings:
                return "", False
            face_id, created = self.clusters.create(embs, stamp), True
        else:
            ident = self.clusters.identities[face_id]
            for e in embs:
                if float(np.linalg.norm(e - mean)) <= self.p.match_distance:
                    self.clusters.add_exemplar(ident, e)
            self.clusters.observe(face_id, stamp)
        for _, q, j in seen:
            self.clusters.add_crop(face_id, q, j)
        del self.pending[track_id]
        self.track_ids[track_id] = face_id
        return face_id, created
