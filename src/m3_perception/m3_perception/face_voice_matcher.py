"""Face↔voice candidate matches from co-occurrence (as REP-155's IdsMatch).

A voice that repeatedly speaks while one face is alone on screen (or clearly dominant, by box
area) is probably that face's voice. Evidence = such utterances; confidence grows with evidence
and shrinks when the voice also speaks over other dominant faces.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass


@dataclass
class MatchCandidate:
    face_id: str
    voice_id: str
    confidence: float  # [0..1]
    evidence_count: int
    stamp: float  # stream time of the latest evidence [s]


@dataclass
class MatcherParams:
    dominance_ratio: float = 2.0  # a face dominates when its area is this many times the next one's
    min_frame_fraction: float = 0.5  # of the frames during an utterance, the share the face must dominate
    min_evidence: int = 2  # utterances needed before a candidate is published
    history_s: float = 120.0  # face frames kept for matching late utterances


class FaceVoiceMatcher:
    def __init__(self, params: MatcherParams | None = None) -> None:
        self.p = params or MatcherParams()
        self._frames: deque[tuple[float, str | None]] = deque()  # (stamp, dominant face or None)
        self.pairs: Counter[tuple[str, str]] = Counter()
        self.voice_utterances: Counter[str] = Counter()  # utterances of a voice with a dominant face

    def observe_faces(self, stamp: float, faces: list[tuple[str, float]]) -> None:
        """One processed frame: (face_id, box area) of the identified faces in it."""
        faces = sorted((f for f in faces if f[0]), key=lambda f: -f[1])
        dominant = None
        if len(faces) == 1 or (len(faces) > 1 and faces[0][1] >= self.p.dominance_ratio * faces[1][1]):
            dominant = faces[0][0]
        self._frames.append((stamp, dominant))
        while self._frames and self._frames[0][0] < stamp - self.p.history_s:
            self._frames.popleft()

    def dominant_face(self, start: float, end: float) -> str | None:
        """The face dominant in at least `min_frame_fraction` of the frames of [start, end], or None."""
        window = [f for t, f in self._frames if start <= t <= end]
        if not window:
            return None
        face, n = Counter(window).most_common(1)[0]
        return face if face is not None and n >= self.p.min_frame_fraction * len(window) else None

    def on_utterance(self, voice_id: str, start: float, end: float) -> MatchCandidate | None:
        """Record one utterance; return the updated candidate for its best face, if strong enough.
        An utterance of no known voice (voice_id "", a short turn) is no evidence."""
        if not voice_id:
            return None
        face = self.dominant_face(start, end)
        if face is None:
            return None
        self.pairs[(face, voice_id)] += 1
        self.voice_utterances[voice_id] += 1
        count = self.pairs[(face, voice_id)]
        if count < self.p.min_evidence:
            return None
        confidence = count / (self.voice_utterances[voice_id] + 1)
        return MatchCandidate(face, voice_id, float(confidence), count, end)

    def merge_voice(self, gone: str, keep: str) -> None:
        """A revision folded voice `gone` into `keep` (voice_revision): its evidence counts for `keep`."""
        for (face, voice), n in list(self.pairs.items()):
            if voice == gone:
                self.pairs[(face, keep)] += n
                del self.pairs[(face, voice)]
        self.voice_utterances[keep] += self.voice_utterances.pop(gone, 0)

    def split_voice(self, voice: str, new: str, face: str) -> None:
        """A revision gave the turns of `voice` spoken over `face` to a new voice (voice_revision): that
        evidence now counts for `new`."""
        moved = self.pairs.pop((face, voice), 0)
        if moved:
            self.pairs[(face, new)] += moved
            self.voice_utterances[new] += moved
            self.voice_utterances[voice] = max(0, self.voice_utterances[voice] - moved)
