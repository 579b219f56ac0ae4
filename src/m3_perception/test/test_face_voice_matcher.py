"""Face↔voice co-occurrence candidates."""

from m3_perception.face_voice_matcher import FaceVoiceMatcher, MatcherParams


def _frames(m: FaceVoiceMatcher, t0: float, t1: float, faces: list[tuple[str, float]]) -> None:
    t = t0
    while t <= t1:
        m.observe_faces(t, faces)
        t += 0.2


def test_candidate_after_repeated_single_face_utterances() -> None:
    m = FaceVoiceMatcher(MatcherParams(min_evidence=2))
    _frames(m, 0.0, 2.0, [("face_1", 10000.0)])
    assert m.on_utterance("voice_1", 0.5, 1.5) is None  # one utterance is not enough
    _frames(m, 2.2, 4.0, [("face_1", 9000.0), ("face_2", 1000.0)])  # face_1 dominant
    c = m.on_utterance("voice_1", 2.5, 3.5)
    assert c is not None and (c.face_id, c.voice_id, c.evidence_count) == ("face_1", "voice_1", 2)
    assert abs(c.confidence - 2 / 3) < 1e-6 and c.stamp == 3.5
    _frames(m, 4.2, 6.0, [("face_1", 5000.0)])
    c3 = m.on_utterance("voice_1", 4.5, 5.5)
    assert c3 is not None and c3.confidence > c.confidence and c3.evidence_count == 3


def test_no_candidate_without_a_dominant_face_or_frames() -> None:
    m = FaceVoiceMatcher(MatcherParams(min_evidence=1))
    assert m.on_utterance("voice_1", 0.0, 1.0) is None  # no frames at all
    _frames(m, 0.0, 2.0, [("face_1", 5000.0), ("face_2", 4000.0)])  # two similar faces
    assert m.on_utterance("voice_1", 0.0, 2.0) is None
    _frames(m, 3.0, 5.0, [])
    assert m.on_utterance("voice_1", 3.0, 5.0) is None
    assert not m.pairs


def test_competing_faces_lower_confidence() -> None:
    m = FaceVoiceMatcher(MatcherParams(min_evidence=1))
    _frames(m, 0.0, 1.0, [("face_1", 100.0)])
    _frames(m, 2.0, 3.0, [("face_2", 100.0)])
    a = m.on_utterance("voice_1", 0.0, 1.0)
    b = m.on_utterance("voice_1", 2.0, 3.0)
    assert a is not None and b is not None and b.face_id == "face_2"
    assert b.confidence < a.confidence
