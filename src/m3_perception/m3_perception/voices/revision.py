"""Voices that can be revised: recent turns re-clustered once later turns are known.

Online assignment (VoicePipeline._identify) decides each turn against the voices known *before* it:
the first turn of a speaker whose voice sits near another's founds a second id for one person, and
a turn given to the nearest voice before its true speaker's voice existed stays there. The reviser
looks back over the turns of the last `window_s` with what came after them:

- pooled voices: each voice's turns in the window, embedded again as one stretch of audio (a longer
  stretch gives a steadier embedding than any one turn: the "stronger embeddings");
- merges: a voice founded inside the window whose pooled embedding is within `merge_cosine` of an
  older voice's is that voice (the younger id is folded into the older, kept as an alias). A voice
  founded on less speech than a pool needs (`min_pooled_s`: one 1-2 s turn, often with another
  speaker's backchannel under it) was a guess: it joins an older voice its turns come within the
  pipeline's own match threshold of;
- corrections: a turn nearer another window voice's pooled embedding than its own by `margin`
  moves there; a short turn with no voice joins a neighbouring turn's voice when near enough, and
  never founds one.

Every change is returned as a VoiceUpdate and published (IdentityUpdate): nothing is renamed silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from m3_perception.identity_clusters import IdentityClusters
from m3_perception.speech.utterances import RATE
from m3_perception.voices.face_split import FaceSplitParams, FaceSplitter


@dataclass
class VoiceUpdate:
    """What one revision changed (published as m3_interfaces/IdentityUpdate)."""

    stamp: float  # stream time the revision covers up to [s]
    merges: list[tuple[str, str]] = field(default_factory=list)  # (merged id, id it joined), in order
    corrections: list[tuple[int, str, str]] = field(default_factory=list)  # (segment_id, previous, now; "" none)
    splits: list[tuple[str, str, str]] = field(default_factory=list)  # (voice, new voice, face it was heard over)

    def __bool__(self) -> bool:
        return bool(self.merges or self.corrections or self.splits)


@dataclass
class RevisionParams:
    enabled: bool = True
    every_s: float = 5.0  # revise when the stream has moved on this far since the last revision [s]
    window_s: float = 30.0  # turns that ended within this much stream time before a revision are revised [s]
    merge_cosine: float = 0.5  # a voice founded in the window joins an older voice at least this near (pooled)
    merge_cosine_narrowband: float = 0.7  # the same for a voice heard through a narrow-band (telephone) channel
    margin: float = 0.1  # a turn moves to another voice only when nearer to it by this much (cosine)
    min_pooled_s: float = 2.0  # speech a voice needs in the window for its pooled embedding to count [s]
    join_gap_s: float = 1.0  # a short voiceless turn may join a neighbouring turn this close in time [s]
    faces: FaceSplitParams = field(default_factory=FaceSplitParams)  # one voice, two faces (voice_faces)


@dataclass
class Turn:
    """One published turn, as the reviser remembers it."""

    segment_id: int
    voice_id: str  # as published, or as revised since
    start: float  # stream time [s]
    end: float  # stream time [s]
    embedding: np.ndarray  # unit speaker embedding of the turn
    samples: np.ndarray  # its voiced audio, 16 kHz mono float32
    short: bool  # shorter than the pipeline's min_turn_s: never moved, only joined when voiceless
    overlap: bool = False  # overlapped speech: given to no voice, never revised
    narrowband: bool = False  # heard through a narrow-band (telephone) channel (band.py)
    face: str = ""  # the face dominant while it was spoken (FaceVoiceMatcher.dominant_face); "" none

    @property
    def duration(self) -> float:
        return self.end - self.start

    def flags(self) -> tuple[bool, bool, bool]:
        """(short, overlap, narrowband), in the constructor's order (identity_state saves them so)."""
        return self.short, self.overlap, self.narrowband


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


class VoiceReviser:
    """Re-clusters the turns of the last `window_s` (see the module docstring); changes the clusters it
    is given (merges, exemplars moved) and returns what changed."""

    def __init__(
        self,
        params: RevisionParams,
        clusters: IdentityClusters,
        encoder,
        match_cosine: float,
        match_cosine_narrowband: float = 0.0,
    ) -> None:
        self.p, self.clusters, self.encoder, self.match_cosine = params, clusters, encoder, match_cosine
        self.match_cosine_narrowband = max(match_cosine, match_cosine_narrowband)
        self.turns: list[Turn] = []
        self.next_at: float | None = None  # stream time of the next revision
        self.faces = FaceSplitter(params.faces)

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)
        if self.next_at is None:
            self.next_at = turn.end + self.p.every_s

    def attribute(self, segment_id: int, face: str) -> str | None:
        """Record the face in view while turn `segment_id` was spoken; return the voice it now has when
        that face moved it to another voice of its group (voice_faces), else None."""
        turn = next((t for t in reversed(self.turns) if t.segment_id == segment_id), None)
        if turn is None or not face:
            return None
        turn.face = face
        voice = self.faces.attribute(turn.voice_id, face, long=not (turn.short or turn.overlap))
        if voice == turn.voice_id:
            return None
        self.clusters.move_exemplar(turn.embedding, turn.voice_id, voice)
        turn.voice_id = voice
        return voice

    def due(self, now: float) -> bool:
        return self.p.enabled and self.next_at is not None and now >= self.next_at

    def revise(self, now: float) -> VoiceUpdate:
        """Revise the window ending at `now` (stream time [s]); forget turns older than the window."""
        self.next_at = now + self.p.every_s
        self.turns = [t for t in self.turns if t.end >= now - self.p.window_s]
        update = VoiceUpdate(now)
        if not self.p.enabled:
            return update
        update.merges = self._merge(now)
        for gone, keep in update.merges:
            for t in self.turns:
                if t.voice_id == gone:
                    t.voice_id = keep
        before = {t.segment_id: t.voice_id for t in self.turns}
        update.splits = self.faces.split(self.turns, self.clusters)
        for t, voice in self.faces.regroup(self.turns, self.clusters):
            t.voice_id = voice
        moved = [
            (t.segment_id, before[t.segment_id], t.voice_id) for t in self.turns if t.voice_id != before[t.segment_id]
        ]
        update.corrections = moved + self._correct() + self._join()
        return update

    # -- pooled voices ----------------------------------------------------------------------------
    def _pooled(self) -> dict[str, np.ndarray]:
        """Each window voice with at least min_pooled_s of long turns: its turns embedded as one stretch."""
        audio: dict[str, list[np.ndarray]] = {}
        for t in self.turns:
            if t.voice_id and not t.short and not t.overlap:
                audio.setdefault(t.voice_id, []).append(t.samples)
        return {
            v: _unit(np.asarray(self.encoder.encode(np.concatenate(xs)), np.float32))
            for v, xs in audio.items()
            if sum(len(x) for x in xs) >= self.p.min_pooled_s * RATE
        }

    def _centroid(self, voice_id: str) -> np.ndarray:
        return _unit(np.mean(np.stack(self.clusters.identities[voice_id].exemplars), axis=0))

    def _merge(self, now: float) -> list[tuple[str, str]]:
        """Voices founded inside the window that pool within merge_cosine of an older voice: the
        younger joins the nearest older one (pooled when it spoke in the window, else its centroid).
        A younger voice with too little speech to pool joins at the match threshold instead: its turns
        are then held to the test online assignment puts a turn to, against the older voices' pools."""
        start = now - self.p.window_s
        young = sorted(
            {t.voice_id for t in self.turns if t.voice_id and not t.short and not t.overlap}
            & {i.id for i in self.clusters.identities.values() if i.first_seen >= start and not i.merged_into},
            key=lambda v: self.clusters.identities[v].first_seen,
        )
        if not young:
            return []
        pooled = self._pooled()
        merges = []
        for y in young:
            mine = pooled.get(y)
            weak = mine is None  # too little speech to pool: its own turns' mean
            if weak:
                mine = _unit(np.mean([t.embedding for t in self.turns if t.voice_id == y and not t.short], axis=0))
            older = [
                i.id
                for i in self.clusters.identities.values()
                if i.id != y
                and not i.merged_into
                and i.first_seen < self.clusters.identities[y].first_seen
                and self.faces.root(i.id) != self.faces.root(y)  # split by face: alike by design
            ]
            narrow = any(t.narrowband for t in self.turns if t.voice_id == y)
            if weak:
                best_cos = self.match_cosine_narrowband if narrow else self.match_cosine
            else:
                best_cos = self.p.merge_cosine_narrowband if narrow else self.p.merge_cosine
            best = None
            for o in older:
                cos = float(mine @ (pooled[o] if o in pooled else self._centroid(o)))  # centroid only when needed
                if cos >= best_cos:
                    best, best_cos = o, cos
            if best is not None:
                self.clusters.merge(y, best)
                pooled.pop(y, None)
                merges.append((y, best))
        return merges

    # -- turns moved ------------------------------------------------------------------------------
    def _means(self, exclude: Turn | None = None) -> dict[str, np.ndarray]:
        """Each window voice with at least min_pooled_s of long turns: the duration-weighted mean of its
        turns' embeddings (cheap enough to leave one turn out)."""
        sums: dict[str, np.ndarray] = {}
        speech: dict[str, float] = {}
        for t in self.turns:
            if t.voice_id and not t.short and not t.overlap and t is not exclude:
                sums[t.voice_id] = sums.get(t.voice_id, 0.0) + t.duration * t.embedding
                speech[t.voice_id] = speech.get(t.voice_id, 0.0) + t.duration
        return {v: _unit(s) for v, s in sums.items() if speech[v] >= self.p.min_pooled_s}

    def _correct(self) -> list[tuple[int, str, str]]:
        """A long turn nearer another window voice than its own by `margin` moves there. Its own
        voice is pooled without it (a turn always resembles a pool it is part of)."""
        out = []
        for t in self.turns:
            if t.short or t.overlap or not t.voice_id:
                continue
            pooled = self._means(exclude=t)
            if len(pooled) < 2:
                continue
            own = pooled.get(t.voice_id)
            own_cos = float(t.embedding @ (own if own is not None else self._centroid(t.voice_id)))
            best, best_cos = None, max(own_cos + self.p.margin, self.match_cosine)
            for v, emb in pooled.items():
                cos = float(t.embedding @ emb)
                if self.faces.root(v) != self.faces.root(t.voice_id) and cos >= best_cos:
                    best, best_cos = v, cos
            if best is not None:
                self.clusters.move_exemplar(t.embedding, t.voice_id, best)
                out.append((t.segment_id, t.voice_id, best))
                t.voice_id = best
        return out

    def _join(self) -> list[tuple[int, str, str]]:
        """A short turn no voice took joins the voice of a neighbouring turn (within join_gap_s) when
        within match_cosine of that voice; it never founds one."""
        out = []
        for k, t in enumerate(self.turns):
            if t.voice_id or t.overlap or not t.short:
                continue
            near = [
                n
                for n in (self.turns[k - 1] if k else None, self.turns[k + 1] if k + 1 < len(self.turns) else None)
                if n is not None and n.voice_id and min(abs(t.start - n.end), abs(n.start - t.end)) <= self.p.join_gap_s
            ]
            scored = [(float(t.embedding @ self._centroid(n.voice_id)), n.voice_id) for n in near]
            if scored and max(scored)[0] >= self.match_cosine:
                t.voice_id = max(scored)[1]
                self.clusters.observe(t.voice_id, t.end)
                out.append((t.segment_id, "", t.voice_id))
        return out


def final_voices(events: list, updates: list[VoiceUpdate]) -> list[tuple[float, float, str]]:
    """(start, end, voice id) of published events once every update is applied (merged ids followed to
    the id they joined): what a consumer that applies the updates ends with."""
    voice = {e.segment_id: e.voice_id for e in events}
    into: dict[str, str] = {}
    for u in updates:
        into.update(u.merges)
        for seg, _, now in u.corrections:
            voice[seg] = now

    def root(v: str) -> str:
        seen = set()
        while v in into and v not in seen:
            seen.add(v)
            v = into[v]
        return v

    return [(e.start, e.end, root(voice[e.segment_id])) for e in events if root(voice[e.segment_id])]
