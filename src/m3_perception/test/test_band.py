"""band.py on real speech: the telephone channel is told from wide-band microphones and synthetic voices."""

from __future__ import annotations

import numpy as np

from m3_perception.material.real_speech import conversation_sources
from m3_perception.material.synthetic import speak
from m3_perception.material.telephone import telephone_channel
from m3_perception.voices.band import high_band_share, is_narrowband


def test_real_speakers_are_wide_band_and_narrow_band_through_a_telephone_channel():
    for speaker, recordings in conversation_sources().items():
        x = recordings[0].samples[: 3 * 16000]
        assert not is_narrowband(x), (speaker, high_band_share(x))
        assert is_narrowband(telephone_channel(x)), (speaker, high_band_share(telephone_channel(x)))


def test_synthetic_voices_and_silence_are_not_narrow_band():
    for voice in ("slt", "kal", "espeak:en-us"):
        assert not is_narrowband(speak("Could you bring the blue folder from my desk please?", voice)), voice
    assert not is_narrowband(np.zeros(16000, np.float32))
    assert not is_narrowband(np.zeros(100, np.float32))


class _TwoVectors:
    """Speaker encoder whose second utterance lies at cosine 0.5 from its first (the threshold logic
    under test, not a model): between the wide-band (0.45) and narrow-band (0.55) thresholds."""

    embedding_model = "test"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, samples: np.ndarray) -> np.ndarray:
        self.calls += 1
        v = np.zeros(192, np.float32)
        v[0], v[1] = (1.0, 0.0) if self.calls == 1 else (0.5, np.sqrt(0.75))
        return v


def _voices(channel) -> list[str]:
    from m3_perception.speech.vad import SileroVad
    from m3_perception.voices.pipeline import VoiceParams, VoicePipeline
    from m3_perception.voices.speaker_turns import TurnParams

    params = VoiceParams(match_cosine=0.45, match_cosine_narrowband=0.55, turns=TurnParams(enabled=False))
    pipe = VoicePipeline(SileroVad(), _TwoVectors(), None, params)
    x = conversation_sources()["librivox"][0].samples[: 3 * 16000]
    gap = np.zeros(16000, np.float32)
    stream = np.concatenate([gap, channel(x), gap, channel(x), gap])
    events = [e for i in range(0, len(stream), 1600) for e in pipe.feed(stream[i : i + 1600], i / 16000)]
    return [e.voice_id for e in events + pipe.flush()]


def test_a_voice_heard_by_telephone_is_matched_with_the_narrow_band_threshold():
    assert _voices(lambda x: x) == ["voice_1", "voice_1"]  # cosine 0.5 >= 0.45: one voice
    assert _voices(telephone_channel) == ["voice_1", "voice_2"]  # 0.5 < 0.55 on the telephone band


class _HalfEncoder:
    """Stand-in speaker encoder for split_turns' thresholds (not a model): a window's 'voice' is which
    half of `stream` it lies in (read from where the slice starts), the two halves at cosine 0.5:
    between the wide-band (0.45) and narrow-band (0.55) merge thresholds."""

    def __init__(self, stream: np.ndarray) -> None:
        self.base, self.half = stream.__array_interface__["data"][0], len(stream) // 2

    def encode(self, x: np.ndarray) -> np.ndarray:
        start = (x.__array_interface__["data"][0] - self.base) // x.itemsize
        share = np.clip((start + len(x) - self.half) / len(x), 0.0, 1.0)  # of the window in the second half
        v = (1 - share) * np.array([1.0, 0.0]) + share * np.array([0.5, np.sqrt(0.75)])
        return v / np.linalg.norm(v)


def _turns(channel, **thresholds) -> list[tuple[int, int]]:
    from m3_perception.voices.speaker_turns import TurnParams, split_turns

    x = np.ascontiguousarray(channel(conversation_sources()["librivox"][0].samples[: 5 * 16000]), np.float32)
    return split_turns(x, _HalfEncoder(x), TurnParams(**thresholds))


def _rejoined(channel) -> list[tuple[int, int]]:
    return _turns(channel, change_cosine=0.6, merge_cosine=0.45, merge_cosine_narrowband=0.55)


def test_pieces_of_a_telephone_segment_are_rejoined_only_at_the_narrow_band_threshold():
    assert _rejoined(lambda x: x) == [(0, 80000)]  # cut at the change, rejoined: cosine 0.5 >= 0.45
    assert _rejoined(telephone_channel) == [(0, 40000), (40000, 80000)]  # 0.5 < 0.55 on the telephone band


def _cuts(channel) -> list[tuple[int, int]]:
    return _turns(channel, change_cosine=0.45, change_cosine_narrowband=0.55, merge_cosine=0.6)


def test_a_change_of_voice_is_found_at_the_narrow_band_threshold_on_a_telephone_segment():
    assert _cuts(lambda x: x) == [(0, 80000)]  # windows meet at cosine 0.5 >= 0.45: no change wide-band
    assert _cuts(telephone_channel) == [(0, 40000), (40000, 80000)]  # 0.5 < 0.55 on the telephone band
