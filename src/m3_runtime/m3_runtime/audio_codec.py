"""Decode microphone chunks (AudioChunk fields) into mono float32 16 kHz samples.

Plain module (no rclpy). Every model downstream (VAD, speaker, ASR) expects 16 kHz mono float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np
from scipy.signal import resample_poly

TARGET_RATE = 16000
_BYTES = {"S16LE": 2, "F32LE": 4}


class AudioDecodeError(ValueError):
    """An audio chunk that cannot be decoded; the message says why."""


@dataclass(frozen=True)
class AudioLimits:
    """What a chunk may ask of the decoder, checked before anything is allocated. The resampler's
    filter grows with the rate (a rate of 999 999 937 Hz needs gigabytes) and its output with the
    chunk's length (a rate of 1 Hz turns 64 KB into 4.7 GB)."""

    min_rate: int = 8000  # [Hz] telephone speech
    max_rate: int = 192000  # [Hz] the highest rate of studio audio interfaces
    max_chunk_s: float = 10.0  # [s] of audio in one chunk (microphones send 0.01-0.1 s, video2bag at most 5 s)


def check_format(
    sample_rate: int,
    channels: int,
    sample_format: str,
    coding_format: str = "wave",
    limits: AudioLimits = AudioLimits(),
) -> str:
    """The normalised sample format when decode_chunk can take audio described so, else AudioDecodeError.
    Apart from decode_chunk for inputs whose format arrives before the bytes (audio_common's AudioInfo)."""
    if coding_format and coding_format.lower() not in ("wave", "raw", "pcm"):
        raise AudioDecodeError(f"unsupported coding_format {coding_format!r}; only raw PCM ('wave') is accepted")
    fmt = sample_format.upper()
    if fmt not in _BYTES:
        raise AudioDecodeError(f"unsupported sample_format {sample_format!r}; expected one of {sorted(_BYTES)}")
    if not limits.min_rate <= sample_rate <= limits.max_rate:
        raise AudioDecodeError(
            f"sample_rate {sample_rate} Hz is outside the accepted {limits.min_rate}..{limits.max_rate} Hz "
            "(audio_sample_rate_min/max)"
        )
    if channels <= 0:
        raise AudioDecodeError(f"invalid channel count {channels}")
    return fmt


def decode_chunk(
    sample_rate: int,
    channels: int,
    sample_format: str,
    data: bytes | bytearray | memoryview,
    coding_format: str = "wave",
    limits: AudioLimits = AudioLimits(),
) -> np.ndarray:
    """Return mono float32 samples at 16 kHz in [-1, 1] from one AudioChunk's fields."""
    fmt = check_format(sample_rate, channels, sample_format, coding_format, limits)
    if len(data) == 0:
        raise AudioDecodeError("empty audio chunk (0 bytes)")
    frame_bytes = _BYTES[fmt] * channels
    if len(data) % frame_bytes:
        raise AudioDecodeError(
            f"audio chunk has {len(data)} bytes, not a multiple of {frame_bytes} ({channels} channel(s) of {fmt})"
        )
    seconds = len(data) // frame_bytes / sample_rate
    if seconds > limits.max_chunk_s:
        raise AudioDecodeError(
            f"audio chunk of {seconds:.1f} s is longer than the limit of {limits.max_chunk_s} s (max_audio_chunk_s)"
        )
    raw = bytes(data)
    if fmt == "S16LE":
        x = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    else:
        x = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if not np.all(np.isfinite(x)):
            raise AudioDecodeError("F32LE audio chunk contains NaN or infinite samples")
    x = x.reshape(-1, channels).mean(axis=1) if channels > 1 else x
    return resample(x, sample_rate)


def resample(x: np.ndarray, rate: int, target: int = TARGET_RATE) -> np.ndarray:
    """Polyphase resampling to `target` Hz (exact rational ratio)."""
    if rate == target:
        return np.ascontiguousarray(x, dtype=np.float32)
    g = gcd(int(rate), int(target))
    return resample_poly(x, target // g, int(rate) // g).astype(np.float32)


def encode_s16le(x: np.ndarray) -> bytes:
    """Inverse of decode_chunk for S16LE mono (for tests, the bench and test publishers)."""
    return (np.clip(x, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


def checked_mono(samples: np.ndarray) -> np.ndarray:
    """Samples as 1-D finite float32 (what every speech and speaker back-end takes), else ValueError."""
    x = np.asarray(samples, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"expected mono samples (1-D), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples contain NaN or infinite values")
    return x
