"""The plain logic behind audio_common input and REP-155 output (no rclpy, no message packages):
AudioCommonStream pairs data with the last AudioInfo under decode_chunk's limits; RecentVoices is
/humans/voices/tracked; valid_id guards /humans/<kind>/<id>/ topic names."""

from __future__ import annotations

import numpy as np
import pytest

from m3_perception.audio_common_input import AudioCommonStream, StreamFormat
from m3_runtime.audio_codec import AudioDecodeError, AudioLimits, decode_chunk, encode_s16le
from m3_runtime.hri_ids import RecentVoices, valid_id

TONE = np.sin(np.arange(4800) * 2 * np.pi * 440 / 48000).astype(np.float32) * 0.5  # 0.1 s at 48 kHz


def stream() -> AudioCommonStream:
    return AudioCommonStream("/audio/audio_info", AudioLimits())


def test_data_before_info_is_refused_with_the_reason() -> None:
    with pytest.raises(AudioDecodeError, match="no AudioInfo received yet on /audio/audio_info"):
        stream().decode(encode_s16le(TONE))


def test_info_format_is_used_for_decoding() -> None:
    s = stream()
    assert s.set_info(StreamFormat(48000, 2, "S16LE", "wave")) and not s.problem
    stereo = encode_s16le(np.repeat(TONE, 2))
    out = s.decode(stereo)
    assert len(out) == 1600 and np.allclose(out, decode_chunk(48000, 2, "S16LE", stereo), atol=0)
    assert not s.set_info(StreamFormat(48000, 2, "S16LE", "wave")), "an unchanged AudioInfo (every 5 s) is no news"


@pytest.mark.parametrize(
    ("fmt", "why"),
    [
        (StreamFormat(16000, 1, "S16LE", "mp3"), "unsupported coding_format 'mp3'"),
        (StreamFormat(16000, 1, "S24LE", "wave"), "unsupported sample_format 'S24LE'"),
        (StreamFormat(999_999_937, 1, "S16LE", "wave"), "sample_rate 999999937 Hz is outside"),
        (StreamFormat(16000, 0, "S16LE", "wave"), "invalid channel count 0"),
    ],
)
def test_unusable_info_is_reported_once_and_its_data_refused(fmt: StreamFormat, why: str) -> None:
    s = stream()
    s.set_info(fmt)
    assert why in s.problem and "/audio/audio_info" in s.problem
    with pytest.raises(AudioDecodeError, match="cannot be used"):
        s.decode(encode_s16le(TONE))
    s.set_info(StreamFormat(48000, 1, "S16LE", "WAVE"))  # the driver's own spelling varies
    assert not s.problem and len(s.decode(encode_s16le(TONE))) == 1600


def test_data_limits_are_those_of_audio_chunks() -> None:
    s = AudioCommonStream("/audio/audio_info", AudioLimits(max_chunk_s=0.05))
    s.set_info(StreamFormat(48000, 1, "S16LE", "wave"))
    with pytest.raises(AudioDecodeError, match="longer than the limit"):
        s.decode(encode_s16le(TONE))
    with pytest.raises(AudioDecodeError, match="not a multiple of 2"):
        s.decode(b"\x01\x02\x03")


def test_recent_voices_window() -> None:
    v = RecentVoices(5.0)
    v.heard("voice_2", 10.0)
    v.heard("voice_10", 12.0)
    assert v.ids() == ["voice_2", "voice_10"]
    assert not v.advance(14.9)
    assert v.advance(15.5) and v.ids() == ["voice_10"]
    assert v.advance(100.0) and v.ids() == []


def test_valid_ids() -> None:
    assert all(valid_id(i) for i in ("face_3", "voice_1", "person_12", "a3eb4"))
    assert not any(valid_id(i) for i in ("", "3face", "face__1", "face/1", "face 1", "face-1"))
