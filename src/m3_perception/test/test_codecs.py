"""Unit tests of the image and audio conversions, including every error path."""

import numpy as np
import pytest

from m3_perception.audio_codec import AudioDecodeError, decode_chunk, encode_s16le
from m3_perception.image_codec import ImageDecodeError, decode_compressed, decode_raw, encode_jpeg


def _img(h: int = 4, w: int = 5) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)


def test_rgb8_roundtrip_with_row_padding() -> None:
    img = _img()
    step = 5 * 3 + 3
    padded = np.zeros((4, step), np.uint8)
    padded[:, :15] = img.reshape(4, 15)
    out = decode_raw("rgb8", 5, 4, step, padded.tobytes())
    assert np.array_equal(out, img)


def test_bgr8_and_mono8() -> None:
    img = _img()
    assert np.array_equal(decode_raw("bgr8", 5, 4, 15, img[:, :, ::-1].tobytes()), img)
    mono = img[:, :, 0].copy()
    out = decode_raw("mono8", 5, 4, 5, mono.tobytes())
    assert out.shape == (4, 5, 3) and np.array_equal(out[:, :, 1], mono)


def test_raw_errors() -> None:
    img = _img()
    with pytest.raises(ImageDecodeError, match="unsupported image encoding"):
        decode_raw("yuv422", 5, 4, 10, img.tobytes())
    with pytest.raises(ImageDecodeError, match="height\\*step"):
        decode_raw("rgb8", 5, 4, 15, img.tobytes()[:-1])
    with pytest.raises(ImageDecodeError, match="empty image"):
        decode_raw("rgb8", 0, 0, 0, b"")
    with pytest.raises(ImageDecodeError, match="step"):
        decode_raw("rgb8", 5, 4, 10, img.tobytes()[:40])
    assert issubclass(ImageDecodeError, ValueError)


def test_compressed_roundtrip_and_errors() -> None:
    img = np.full((32, 48, 3), (200, 30, 60), np.uint8)
    out = decode_compressed("jpeg", encode_jpeg(img, 95))
    assert out.shape == img.shape and np.abs(out.astype(int) - img).max() < 8
    with pytest.raises(ImageDecodeError, match="unsupported compressed"):
        decode_compressed("webp", b"abc")
    with pytest.raises(ImageDecodeError, match="empty compressed"):
        decode_compressed("png", b"")
    with pytest.raises(ImageDecodeError, match="could not decode"):
        decode_compressed("jpeg", b"not a jpeg at all")


def test_audio_s16_and_f32_and_stereo() -> None:
    t = np.arange(16000) / 16000
    x = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    y = decode_chunk(16000, 1, "S16LE", encode_s16le(x))
    assert y.dtype == np.float32 and np.abs(y - x).max() < 1e-3
    stereo = np.stack([x, x], axis=1).astype("<f4").tobytes()
    y2 = decode_chunk(16000, 2, "F32LE", stereo)
    assert np.allclose(y2, x, atol=1e-6)


def test_audio_resamples_to_16k() -> None:
    t = np.arange(48000) / 48000
    x = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    y = decode_chunk(48000, 1, "F32LE", x.astype("<f4").tobytes())
    assert len(y) == 16000
    spectrum = np.abs(np.fft.rfft(y))
    assert abs(int(np.argmax(spectrum)) - 440) <= 1  # 1 Hz bins over 1 s


def test_audio_errors() -> None:
    with pytest.raises(AudioDecodeError, match="not a multiple"):
        decode_chunk(16000, 1, "S16LE", b"\x00\x01\x02")
    with pytest.raises(AudioDecodeError, match="NaN"):
        decode_chunk(16000, 1, "F32LE", np.array([0.1, np.nan], "<f4").tobytes())
    with pytest.raises(AudioDecodeError, match="sample_format"):
        decode_chunk(16000, 1, "U8", b"\x00\x01")
    with pytest.raises(AudioDecodeError, match="empty"):
        decode_chunk(16000, 1, "S16LE", b"")
    with pytest.raises(AudioDecodeError, match="sample_rate"):
        decode_chunk(0, 1, "S16LE", b"\x00\x00")
    with pytest.raises(AudioDecodeError, match="channel"):
        decode_chunk(16000, 0, "S16LE", b"\x00\x00")
    with pytest.raises(AudioDecodeError, match="coding_format"):
        decode_chunk(16000, 1, "S16LE", b"\x00\x00", coding_format="opus")
    assert issubclass(AudioDecodeError, ValueError)
