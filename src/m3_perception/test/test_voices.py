"""Voices on synthesised speech: VAD, utterance cuts, speaker ids, transcripts, error paths."""

import numpy as np
import pytest

from m3_perception.assembly import DEFAULT_SPEAKER_BACKEND, speaker_encoder
from m3_perception.material.metrics import wer
from m3_perception.material.synthetic import speak
from m3_perception.model_files import ModelFileMissing
from m3_perception.speech.pocketsphinx_asr import PocketsphinxAsr
from m3_perception.speech.utterances import RATE, SegmenterParams, UtteranceSegmenter
from m3_perception.speech.vad import FRAME, SileroVad
from m3_perception.voices.campplus_encoder import CamPlusEncoder
from m3_perception.voices.pipeline import VoiceParams, VoicePipeline
from m3_perception.voices.resemblyzer_encoder import VoiceEncoder

LINES = [
    ("slt", "the red folder is on the kitchen table"),
    ("kal", "my name is bob and i like green tea"),
    ("slt", "alice put the keys in the drawer this morning"),
    ("espeak:en-us", "please bring me the blue cup"),
    ("kal", "the meeting starts at three in the afternoon"),
]


@pytest.fixture(scope="module")
def speech() -> list[np.ndarray]:
    return [speak(text, voice) for voice, text in LINES]


@pytest.fixture(scope="module")
def models() -> tuple[SileroVad, CamPlusEncoder, PocketsphinxAsr]:
    """VAD, the default speaker encoder (CAM++) and pocketsphinx."""
    return SileroVad(), speaker_encoder(DEFAULT_SPEAKER_BACKEND), PocketsphinxAsr()


def test_vad_separates_speech_from_silence(models, speech) -> None:
    vad = models[0]
    vad.reset()
    silence = [vad.frame_prob(np.zeros(FRAME, np.float32)) for _ in range(10)]
    x = speech[0]
    voiced = [vad.frame_prob(x[i : i + FRAME]) for i in range(0, len(x) - FRAME, FRAME)]
    assert max(silence) < 0.2 and np.mean(np.array(voiced) > 0.5) > 0.5
    with pytest.raises(ValueError, match="512"):
        vad.frame_prob(np.zeros(100, np.float32))


def test_segmenter_hangover_min_and_max_length() -> None:
    """Driven by a scripted probability so the state machine itself is checked."""
    probs: list[float] = []
    seg = UtteranceSegmenter(
        lambda f: probs.pop(0), SegmenterParams(min_utterance_s=0.2, hangover_s=0.1, max_utterance_s=1.0)
    )
    # 3 voiced frames (96 ms, too short), 10 silent, 20 voiced, 10 silent, 40 voiced (cut at ≥ 1 s)
    script = [0.9] * 3 + [0.0] * 10 + [0.9] * 20 + [0.0] * 10 + [0.9] * 40 + [0.0] * 10
    probs.extend(script)
    out = seg.feed(np.zeros(FRAME * len(script), np.float32))
    assert [(u.start // FRAME, u.end // FRAME) for u in out] == [
        (13, 33),
        (43, 75),
        (75, 83),
    ]  # 1 s = 31.25 frames → cut at frame 32
    assert len(out[0].samples) == 20 * FRAME + 2 * int(0.1 * RATE)  # padded on both sides


def test_voice_pipeline_ids_and_transcripts(models, speech) -> None:
    vad, enc, asr = models
    vad.reset()
    pipe = VoicePipeline(vad, enc, asr, VoiceParams())
    gap = np.zeros(int(0.8 * RATE), np.float32)
    stream = np.concatenate([gap] + [np.concatenate([s, gap]) for s in speech])
    t0 = 100.0
    events = []
    for i in range(0, len(stream), 1600):  # 100 ms chunks
        events += pipe.feed(stream[i : i + 1600], t0 + i / RATE)
    events += pipe.flush()
    assert len(events) == len(LINES), [(e.start, e.end, e.transcript.text) for e in events]
    ids = [e.voice_id for e in events]
    assert ids[0] == ids[2] and ids[1] == ids[4]
    assert len({ids[0], ids[1], ids[3]}) == 3
    assert [e.segment_id for e in events] == [1, 2, 3, 4, 5]
    # Stream time: the first utterance starts right after the 0.8 s of silence.
    assert abs(events[0].start - (t0 + 0.8)) < 0.3 and events[0].end > events[0].start + 1.0
    for e in events:
        assert e.embedding.shape == (192,) and 0.0 <= e.transcript.confidence <= 1.0
    # Festival HTS speech is transcribed well by pocketsphinx.
    for k in (0, 2):
        assert wer(LINES[k][1], events[k].transcript.text) <= 0.35, events[k].transcript.text
    assert events[0].transcript.language == "en"


def test_voice_encoder_errors(models) -> None:
    enc = models[1]
    with pytest.raises(ValueError, match="too short"):
        enc.encode(np.zeros(100, np.float32))
    with pytest.raises(ValueError, match="mono"):
        enc.encode(np.zeros((2, 8000), np.float32))
    with pytest.raises(ValueError, match="NaN"):
        enc.encode(np.full(8000, np.nan, np.float32))


def test_missing_voice_models_are_named(tmp_path) -> None:
    with pytest.raises(ModelFileMissing, match=r"missing\.onnx"):
        SileroVad(tmp_path / "missing.onnx")
    with pytest.raises(ModelFileMissing, match=r"gone\.pt"):
        VoiceEncoder(tmp_path / "gone.pt")
    with pytest.raises(ModelFileMissing, match=r"CAM\+\+ speaker model file not found: .*gone\.pt"):
        CamPlusEncoder(tmp_path / "gone.pt")
    with pytest.raises(ModelFileMissing, match="mdef"):
        PocketsphinxAsr(str(tmp_path))


def test_stamps_going_back_never_make_an_utterance_end_before_it_starts(models, speech) -> None:
    """Issue 13: chunks stamped back in time (a recording played again mid-sentence) gave end < start."""
    vad, enc, _ = models
    vad.reset()
    pipe = VoicePipeline(vad, enc, None, VoiceParams())
    gap = np.zeros(int(0.5 * RATE), np.float32)
    stream = np.concatenate([gap, speech[0], gap, speech[1], gap])
    back_at = (len(gap) + len(speech[0]) // 2) // 1600 * 1600  # restarts 3 s earlier mid-way through line 1
    events = []
    for i in range(0, len(stream), 1600):
        events += pipe.feed(stream[i : i + 1600], 100.0 + i / RATE - (3.0 if i >= back_at else 0.0))
    events += pipe.flush()
    assert len(events) >= 2, [(e.start, e.end) for e in events]
    assert all(e.end >= e.start for e in events), [(e.start, e.end) for e in events]
    assert abs(events[0].start - 100.5) < 0.3 and events[0].end <= 100.0 + (back_at + FRAME) / RATE
