"""Online identity clustering: unit embeddings → stable ids ("face_N", "voice_N") for an episode.

Each identity keeps up to `max_exemplars` embeddings; a new embedding joins the identity whose
nearest exemplar is within `max_distance` (L2 on unit vectors), else it founds a new identity.
Exemplars stay after a person leaves, so a returning person gets the same id back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class IdentityState:
    """What the perception node knows about one identity."""

    id: str
    first_seen: float
    last_seen: float
    observation_count: int = 0
    exemplars: list[np.ndarray] = field(default_factory=list)
    crops: list[tuple[float, bytes]] = field(default_factory=list)  # (quality, jpeg), best first
    merged_into: str = ""  # the identity this one was merged into (its id stays taken, never reused)

    def best_crop(self) -> bytes:
        return self.crops[0][1] if self.crops else b""


def cosine_to_l2(cosine: float) -> float:
    """L2 distance between unit vectors with the given cosine similarity."""
    return float(np.sqrt(max(0.0, 2.0 - 2.0 * cosine)))


class IdentityClusters:
    """Assign embeddings to identities online; ids are `prefix_N`, N from 1, never reused."""

    def __init__(
        self, prefix: str, max_distance: float, max_exemplars: int = 20, max_crops: int = 3, centroid: bool = False
    ) -> None:
        """`centroid`: an identity's distance is also measured to the mean of its exemplars (the
        nearer of the two counts), as GE2E speaker embeddings are trained to be compared."""
        if max_distance <= 0:
            raise ValueError("max_distance must be > 0")
        self.centroid = centroid
        self.prefix = prefix
        self.max_distance = max_distance
        self.max_exemplars = max_exemplars
        self.max_crops = max_crops
        self.identities: dict[str, IdentityState] = {}

    def distance(self, ident_id: str, emb: np.ndarray) -> float:
        """Distance of `emb` to one identity (min over its exemplars, and their mean with `centroid`)."""
        ex = np.stack(self.identities[ident_id].exemplars)
        d = float(np.min(np.linalg.norm(ex - emb, axis=1)))
        if self.centroid and len(ex) > 1:
            c = ex.mean(axis=0)
            d = min(d, float(np.linalg.norm(c / max(float(np.linalg.norm(c)), 1e-12) - emb)))
        return d

    def nearest(self, emb: np.ndarray) -> tuple[str | None, float]:
        """Closest identity and its distance (see `distance`); (None, inf) when empty."""
        best, best_d = None, float("inf")
        for ident in self.identities.values():
            if ident.merged_into:
                continue
            d = self.distance(ident.id, emb)
            if d < best_d:
                best, best_d = ident.id, d
        return best, best_d

    def assign(self, emb: np.ndarray, stamp: float, max_distance: float | None = None) -> tuple[str, bool]:
        """Return (identity id, created?) for one unit embedding observed at `stamp` (`max_distance`:
        this observation's own threshold, e.g. for audio of another channel; None: the clusters')."""
        emb = np.asarray(emb, np.float32)
        ident_id, d = self.nearest(emb)
        created = ident_id is None or d > (self.max_distance if max_distance is None else max_distance)
        if created:
            ident_id = f"{self.prefix}_{len(self.identities) + 1}"
            self.identities[ident_id] = IdentityState(ident_id, stamp, stamp)
        ident = self.identities[ident_id]
        self.add_exemplar(ident, emb)
        self.observe(ident_id, stamp)
        return ident_id, created

    def create(self, embs: list[np.ndarray], stamp: float) -> str:
        """Found a new identity from one or more embeddings of one person; return its id."""
        ident_id = f"{self.prefix}_{len(self.identities) + 1}"
        ident = self.identities[ident_id] = IdentityState(ident_id, stamp, stamp)
        for e in embs:
            self.add_exemplar(ident, np.asarray(e, np.float32))
        self.observe(ident_id, stamp)
        return ident_id

    def observe(self, ident_id: str, stamp: float) -> None:
        """Count one more observation (e.g. a tracked frame that was not re-embedded)."""
        ident = self.identities[ident_id]
        ident.observation_count += 1
        ident.first_seen = min(ident.first_seen, stamp)
        ident.last_seen = max(ident.last_seen, stamp)

    def add_crop(self, ident_id: str, quality: float, jpeg: bytes) -> bool:
        """Keep the best `max_crops` crops; return True when this crop was kept."""
        crops = self.identities[ident_id].crops
        if len(crops) >= self.max_crops and quality <= crops[-1][0]:
            return False
        crops.append((quality, jpeg))
        crops.sort(key=lambda c: -c[0])
        del crops[self.max_crops :]
        return True

    def merge(self, gone: str, keep: str) -> None:
        """Fold identity `gone` into `keep` (a revision found them one person): exemplars, counts and
        times move; `gone` stays, marked merged, so its id is never given again."""
        if gone == keep or self.identities[keep].merged_into:
            raise ValueError(f"cannot merge {gone} into {keep}")
        a, b = self.identities[gone], self.identities[keep]
        for emb in a.exemplars:
            self.add_exemplar(b, emb)
        b.observation_count += a.observation_count
        b.first_seen, b.last_seen = min(a.first_seen, b.first_seen), max(a.last_seen, b.last_seen)
        a.exemplars, a.merged_into = [], keep

    def split(self, src: str, embs: list[np.ndarray], stamp: float) -> str:
        """A new identity from observations that were `src`'s (a revision found them someone else's);
        their exemplars leave `src` (which keeps at least one). Returns the new id."""
        new = self.create(embs, stamp)
        for emb in embs:
            ex = self.identities[src].exemplars
            kept = [k for k, e in enumerate(ex) if np.array_equal(e, emb)]
            if kept and len(ex) > 1:
                del ex[kept[0]]
        return new

    def move_exemplar(self, emb: np.ndarray, src: str, dst: str) -> None:
        """An observation revised from `src` to `dst`: its exemplar (if kept) moves with it."""
        ex = self.identities[src].exemplars
        kept = [k for k, e in enumerate(ex) if np.array_equal(e, emb)]
        if kept and len(ex) > 1:
            del ex[kept[0]]
        self.add_exemplar(self.identities[dst], np.asarray(emb, np.float32))

    def add_exemplar(self, ident: IdentityState, emb: np.ndarray) -> None:
        # Skip near-duplicates so the exemplar budget covers varied poses/utterances.
        if ident.exemplars and float(np.min(np.linalg.norm(np.stack(ident.exemplars) - emb, axis=1))) < 0.05:
            return
        ident.exemplars.append(emb)
        if len(ident.exemplars) > self.max_exemplars:
            ident.exemplars.pop(1)  # keep the founding exemplar, drop the oldest other one
