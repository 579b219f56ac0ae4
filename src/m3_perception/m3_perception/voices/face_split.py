"""Two people under one voice, told apart by whose face is in view when the voice speaks.

A speaker embedding can put two people in one voice when their voices are alike (measured: espeak-ng
voices that differ only in accent are one speaker to CAM++, cosine 0.80-0.88 across people and
0.84-0.88 within one). No voice threshold can part them; their faces can. When one voice's turns so
far were spoken over two different dominant faces (FaceVoiceMatcher.dominant_face), each at least
`min_turns` times and the lesser at least `min_share` of them, and the second face has no voice of
its own (else it is a listener the camera looked at while the first spoke), the window's turns over
the second face become a new voice. From then on the two voices are one *group*: the embedding cannot
choose between them, so inside a group a turn goes to the voice of the face in view (`attribute`),
and a turn with no face in view keeps the embedding's choice.

Without a face in view (audio only) nothing here acts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from m3_perception.identity_clusters import IdentityClusters


@dataclass
class FaceSplitParams:
    enabled: bool = True
    min_turns: int = 2  # turns over each of the two faces before a voice is split
    min_share: float = 0.3  # the second face's share of the voice's turns with a face in view


@dataclass
class FaceSplit:
    """What the face evidence of the voices knows; part of the saved identity state."""

    pairs: Counter = field(default_factory=Counter)  # (face id, voice id) -> long turns over that face
    face_voice: dict[str, str] = field(default_factory=dict)  # inside a group: face id -> its voice id
    group: dict[str, str] = field(default_factory=dict)  # voice id -> the voice it was split from (root)


class FaceSplitter:
    """Splits and attributes voices by face (see the module docstring)."""

    def __init__(self, params: FaceSplitParams) -> None:
        self.p, self.state = params, FaceSplit()

    def root(self, voice: str) -> str:
        return self.state.group.get(voice, voice)

    def attribute(self, voice: str, face: str, long: bool) -> str:
        """The voice a turn of `voice` spoken over `face` belongs to (`voice` unless the two are a group
        and the face is another member's); counts the evidence of long turns."""
        if not (self.p.enabled and voice and face):
            return voice
        voice = self.member_for(face, voice) or voice
        if long:
            self.state.pairs[(face, voice)] += 1
        return voice

    def member_for(self, face: str, voice: str) -> str | None:
        """Another voice of `voice`'s group that `face` speaks as, or None."""
        other = self.state.face_voice.get(face)
        return other if other and other != voice and self.root(other) == self.root(voice) else None

    def has_own_voice(self, face: str, voice: str) -> bool:
        """`face` speaks as some voice outside `voice`'s group (at least min_turns times)."""
        return any(
            f == face and self.root(v) != self.root(voice) and n >= self.p.min_turns
            for (f, v), n in self.state.pairs.items()
        )

    def split(self, turns: list, clusters: IdentityClusters) -> list[tuple[str, str, str]]:
        """Split each voice whose turns so far fell over two faces (the evidence counts every long turn
        since the start); the window `turns` over the second face move to the new voice (their voice
        ids are changed). Returns (voice, new voice, face) per split."""
        if not self.p.enabled:
            return []
        out = []
        for voice in sorted({v for _, v in self.state.pairs}):
            faces = sorted(
                ((f, n) for (f, v), n in self.state.pairs.items() if v == voice), key=lambda fn: (-fn[1], fn[0])
            )
            if len(faces) < 2:
                continue
            face, n = faces[1]  # the face the voice has most evidence with keeps it
            if n < self.p.min_turns or n < self.p.min_share * sum(m for _, m in faces):
                continue
            if face in self.state.face_voice or self.has_own_voice(face, voice):
                continue  # already a voice of its own (a listener in view, or split before)
            moving = [t for t in turns if t.voice_id == voice and t.face == face and not t.short and not t.overlap]
            if not moving:
                continue  # nothing of it in the window to found the new voice on: at a later revision
            new = clusters.split(voice, [t.embedding for t in moving], min(t.start for t in moving))
            for t in moving:
                t.voice_id = new
            self.state.face_voice.setdefault(faces[0][0], voice)
            self.state.face_voice[face] = new
            self.state.group[new] = self.root(voice)
            self.state.pairs[(face, new)] += self.state.pairs.pop((face, voice), 0)
            out.append((voice, new, face))
        return out

    def regroup(self, turns: list, clusters: IdentityClusters) -> list:
        """Turns of a group spoken over another member's face: moved to that member (returned)."""
        moved = []
        for t in turns:
            if t.short or t.overlap or not t.face or not t.voice_id:
                continue
            other = self.member_for(t.face, t.voice_id)
            if other:
                clusters.move_exemplar(np.asarray(t.embedding), t.voice_id, other)
                moved.append((t, other))
        return moved
