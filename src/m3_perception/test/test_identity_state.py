"""Perception's identity state saved and restored (issue 13: a resumed replay must know the same people).

Pipelines that continue after a save → file → restore into freshly built pipelines must give exactly
what the original pipelines give, also when the save falls in the middle of an utterance; a damaged,
foreign or pickled file is refused with StateError and leaves the pipelines untouched.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from m3_perception import identity_state
from m3_perception.assembly import DEFAULT_SPEAKER_BACKEND, speaker_encoder
from m3_perception.face_voice_matcher import FaceVoiceMatcher
from m3_perception.faces.face_encoder import FaceEncoder
from m3_perception.faces.pipeline import FacePipeline
from m3_perception.material.synthetic import compose, face_photos, speak
from m3_perception.speech.utterances import RATE
from m3_perception.speech.vad import SileroVad
from m3_perception.voices.pipeline import VoicePipeline
from m3_runtime.state_file import StateError, read_state, write_state

pytestmark = pytest.mark.reliability


@pytest.fixture(scope="module")
def encoders() -> tuple[FaceEncoder, object]:
    """The face encoder and the default speaker encoder (CAM++)."""
    return FaceEncoder(), speaker_encoder(DEFAULT_SPEAKER_BACKEND)


@pytest.fixture(scope="module")
def stream() -> tuple[list[tuple[float, str, object]], float]:
    """(stamp, "frame" | "audio", data) of two people on camera in turn, each speaking twice; and a
    moment inside the third line (both people known by then)."""
    photos = face_photos()
    scenes = {
        "slt": compose(photos, [("astronaut", 200, 100, 1.0)]),
        "kal": compose(photos, [("cameraman", 220, 120, 1.0)]),
    }
    lines = [("slt", "my name is alice and i am a nurse"), ("kal", "i am bob and i live next door")]
    lines += [("slt", "i like green tea in the morning with honey"), ("kal", "the keys are on the kitchen table")]
    gap = np.zeros(int(0.6 * RATE), np.float32)
    audio, who = [gap], [("slt", 0.0)]
    for voice, text in lines:
        who.append((voice, sum(len(a) for a in audio) / RATE))
        audio += [speak(text, voice), gap]
    track = np.concatenate(audio)
    events: list[tuple[float, str, object]] = []
    events += [(i / RATE, "audio", track[i : i + 1600]) for i in range(0, len(track), 1600)]
    for k in range(int(len(track) / RATE / 0.2)):
        t = k * 0.2
        voice = [v for v, start in who if start <= t][-1]
        events.append((t, "frame", scenes[voice]))
    return sorted(events, key=lambda e: (e[0], e[1])), who[3][1] + 1.0


def _pipelines(encoders) -> tuple[FacePipeline, VoicePipeline, FaceVoiceMatcher]:
    faces, voices = encoders
    return FacePipeline(faces), VoicePipeline(SileroVad(), voices, None), FaceVoiceMatcher()


def _step(pipes, stamp: float, kind: str, data) -> list[tuple]:
    """What the pipelines report for one input, as comparable tuples."""
    faces, voices, matcher = pipes
    if kind == "frame":
        obs = faces.process(data, stamp)
        matcher.observe_faces(stamp, [(o.face_id, o.box[2] * o.box[3]) for o in obs])
        return [("face", o.face_id, o.track_id, o.new_identity) for o in obs]
    out = []
    for e in voices.feed(data, stamp):
        match = matcher.on_utterance(e.voice_id, e.start, e.end)
        out.append(("voice", e.segment_id, e.voice_id, round(e.start, 6), round(e.end, 6), e.new_identity))
        if match is not None:
            out.append(("match", match.face_id, match.voice_id, match.evidence_count))
    for u in voices.take_updates():  # revisions (voice_revision) look back at turns from before the cut
        out.append(("revision", round(u.stamp, 6), tuple(u.merges), tuple(u.corrections)))
    return out


def test_restored_pipelines_continue_exactly_like_the_originals(encoders, stream, tmp_path) -> None:
    events, moment = stream
    original = _pipelines(encoders)
    cut = next(i for i, (t, _, _) in enumerate(events) if t >= moment)
    for event in events[:cut]:
        _step(original, *event)
    assert original[1].segmenter._speech_start is not None  # saved in the middle of an utterance
    write_state(tmp_path / "state.npz", *identity_state.capture(*original))
    restored = _pipelines(encoders)
    identity_state.restore(*restored, *read_state(tmp_path / "state.npz"))
    after = [(_step(original, *e), _step(restored, *e)) for e in events[cut:]]
    assert [a for a, _ in after] == [b for _, b in after]
    reported = [r for a, _ in after for r in a]
    assert {r[2] for r in reported if r[0] == "voice"} >= {"voice_1", "voice_2"}  # both known voices came back
    assert {r[1] for r in reported if r[0] == "face"} == {"face_1", "face_2"}
    assert not any(r[-1] for r in reported if r[0] in ("face", "voice"))  # nobody new after the restore
    assert restored[1].reviser.turns and [t.segment_id for t in restored[1].reviser.turns] == [
        t.segment_id for t in original[1].reviser.turns
    ]  # the revision window came back with the rest


def _damaged(path) -> dict[str, bytes]:
    good = path.read_bytes()
    pickled = io.BytesIO()
    np.savez(pickled, __meta__=np.frombuffer(b"{}", np.uint8), a0=np.array([{"x": 1}], dtype=object))
    not_json = io.BytesIO()
    np.savez(not_json, __meta__=np.frombuffer(b"\xff{", np.uint8))
    no_meta = io.BytesIO()
    np.savez(no_meta, a0=np.zeros(3))
    torn_member = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(torn_member, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, data[: len(data) // 2] if name != "__meta__.npy" else data)
    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "not a zip": b"PK\x03\x04 this is not an archive",
        "pickled object array": pickled.getvalue(),
        "metadata not JSON": not_json.getvalue(),
        "no metadata": no_meta.getvalue(),
        "arrays cut short": torn_member.getvalue(),
    }


def test_damaged_or_foreign_state_is_refused_and_changes_nothing(
    encoders, stream, tmp_path, reliability_counts
) -> None:
    pipes = _pipelines(encoders)
    for event in stream[0][:60]:
        _step(pipes, *event)
    meta, arrays = identity_state.capture(*pipes)
    write_state(tmp_path / "good.npz", meta, arrays)
    tried = 0
    for name, data in _damaged(tmp_path / "good.npz").items():
        bad = tmp_path / "bad.npz"
        bad.write_bytes(data)
        try:
            identity_state.restore(*_pipelines(encoders), *read_state(bad))
            refused = False
        except StateError:
            refused = True
        assert refused, f"a state file with {name} was accepted"
        tried += 1
    foreign = [
        {**meta, "format": "something else"},
        {**meta, "version": 99},
        {k: v for k, v in meta.items() if k != "voices"},
        {**meta, "faces": {**meta["faces"], "tracks": [{"id": 1, "box": [1, 2]}]}},
        {**meta, "faces": {**meta["faces"], "clusters": [{"id": "face_1", "exemplars": ["a9999"]}]}},
        {**meta, "voices": {**meta["voices"], "probs": meta["faces"]["tracks"][0]["thumb"] or "a0"}},
    ]
    fresh = _pipelines(encoders)
    before = identity_state.capture(*fresh)
    for m in foreign:
        with pytest.raises(StateError):
            identity_state.restore(*fresh, m, arrays)
        tried += 1
    with pytest.raises(StateError):  # an array of the wrong kind (bytes where floats belong)
        identity_state.restore(*fresh, meta, {k: v.astype(np.uint8) for k, v in arrays.items()})
    after = identity_state.capture(*fresh)
    assert json_equal(before, after)  # every refusal left the pipelines as they were
    assert tried == 13
    reliability_counts.tried(tried + 1)


def json_equal(a: tuple[dict, dict], b: tuple[dict, dict]) -> bool:
    return a[0] == b[0] and a[1].keys() == b[1].keys() and all(np.array_equal(a[1][k], b[1][k]) for k in a[1])
