"""Unit tests of the image and audio conversions, including every error path."""

import numpy as np
import pytest

from m3_perception.material.synthetic import black_png, jpeg_claiming, png_claiming
from m3_runtime.audio_codec import AudioDecodeError, decode_chunk, encode_s16le
from m3_runtime.image_codec import ImageDecodeError, decode_compressed, decode_raw, encode_jpeg


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


@pytest.mark.parametrize("make", [jpeg_claiming, png_claiming])
def test_compressed_image_declaring_30000x30000_is_refused_before_decoding(make) -> None:
    """Issue 13: a 17 KB JPEG declaring 30000x30000 decoded to 2.7 GB and crashed mediapipe."""
    data = make(30000, 30000)
    assert len(data) < 20000
    with pytest.raises(ImageDecodeError, match="30000x30000 = 900000000 pixels is over the limit of 40000000"):
        decode_compressed("png" if make is png_claiming else "jpeg", data)
    assert decode_compressed("jpeg", make(64, 48), max_pixels=64 * 48).shape == (48, 64, 3)  # at the limit


def test_a_small_png_of_a_huge_image_is_refused_undecoded() -> None:
    """Issue 13: a 249 KB PNG of 16000x16000 cost 1.9 GB and 7.6 s to decode, without a warning."""
    assert decode_compressed("png", black_png(64, 48)).shape == (48, 64, 3)
    data = black_png(16000, 16000)
    assert len(data) < 250_000
    with pytest.raises(ImageDecodeError, match="16000x16000 = 256000000 pixels is over the limit of 40000000"):
        decode_compressed("png", data)


@pytest.mark.parametrize("make", [jpeg_claiming, png_claiming])
def test_opencv_refusing_a_header_is_a_decode_error(make) -> None:
    """Past OpenCV's own limit (2**30 pixels) cv2.imdecode raises cv2.error: it becomes ImageDecodeError."""
    with pytest.raises(ImageDecodeError, match="over the limit"):
        decode_compressed("jpeg", make(60000, 60000))
    with pytest.raises(ImageDecodeError, match="could not decode"):
        decode_compressed("jpeg", make(60000, 60000), max_pixels=2**40)


def test_declared_sizes_and_headers_that_declare_none() -> None:
    from m3_runtime.image_codec import declared_size

    assert declared_size(jpeg_claiming(30000, 20000)) == declared_size(png_claiming(30000, 20000)) == (30000, 20000)
    with pytest.raises(ImageDecodeError, match="neither a PNG nor a JPEG signature"):
        decode_compressed("jpeg", b"GIF89a" + bytes(20))
    with pytest.raises(ImageDecodeError, match="no frame header"):
        decode_compressed("jpeg", b"\xff\xd8\xff\xe0\x00\x04ab\xff\xda\x00\x02")
    with pytest.raises(ImageDecodeError, match="empty size"):
        decode_compressed("png", png_claiming(0, 48))


def test_raw_image_over_the_pixel_limit_is_refused_before_touching_its_data() -> None:
    """Issue 13: a valid 27000x27000 mono8 query crashed the memory node (2.2 GB RGB, then dlib)."""
    data = memoryview(np.zeros(27000 * 27000, np.uint8))  # calloc'd: never touched unless decoded
    with pytest.raises(ImageDecodeError, match="27000x27000 = 729000000 pixels is over the limit"):
        decode_raw("mono8", 27000, 27000, 27000, data)
    with pytest.raises(ImageDecodeError, match="payload height\\*step = 100\\*2000000 bytes is over the limit of 400"):
        decode_raw("mono8", 100, 100, 2_000_000, b"", max_pixels=100 * 100)


@pytest.mark.parametrize("rate", [999_999_937, 1, 7999, 192001])
def test_audio_sample_rate_outside_the_accepted_range_is_refused(rate: int) -> None:
    """Issue 13: 999 999 937 Hz raised MemoryError in the resampler; 1 Hz made 64 KB into 4.7 GB."""
    with pytest.raises(AudioDecodeError, match=f"sample_rate {rate} Hz is outside the accepted 8000..192000 Hz"):
        decode_chunk(rate, 1, "S16LE", bytes(65536))


def test_audio_chunk_longer_than_the_limit_is_refused() -> None:
    from m3_runtime.audio_codec import AudioLimits

    ten_s = bytes(2 * 16000 * 10)
    assert len(decode_chunk(16000, 1, "S16LE", ten_s)) == 160000
    with pytest.raises(AudioDecodeError, match=r"10\.0 s is longer than the limit of 5\.0 s"):
        decode_chunk(16000, 1, "S16LE", ten_s, limits=AudioLimits(max_chunk_s=5.0))
    assert len(decode_chunk(4000, 1, "S16LE", bytes(800), limits=AudioLimits(min_rate=4000))) == 1600
