"""Decode camera messages (sensor_msgs/Image, CompressedImage fields) into RGB numpy arrays.

Plain module (no rclpy) so the conversions are unit-testable; the node passes message fields in.
Every size is checked against `max_pixels` before anything is allocated: a 17 KB JPEG may declare
30000x30000 pixels (2.7 GB decoded), so compressed images are refused on their header's dimensions.
"""

from __future__ import annotations

import cv2
import numpy as np

_CHANNELS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}
DEFAULT_MAX_PIXELS = 40_000_000  # 40 MP: an 8K frame is 33 MP; decoded RGB at most 120 MB
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic); C4, C8 and CC are not frames.
_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


class ImageDecodeError(ValueError):
    """A camera frame that cannot be turned into an RGB image; the message says why."""


def _check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width * height > max_pixels:
        raise ImageDecodeError(
            f"image of {width}x{height} = {width * height} pixels is over the limit of {max_pixels} (max_image_pixels)"
        )


def decode_raw(
    encoding: str,
    width: int,
    height: int,
    step: int,
    data: bytes | bytearray | memoryview,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> np.ndarray:
    """Return an HxWx3 uint8 RGB copy of a sensor_msgs/Image payload.

    Rows may be padded (step > width*channels); padding is dropped. Refused before the data is
    touched: more than max_pixels pixels, or a payload (height*step) over 4 bytes per allowed pixel.
    """
    enc = encoding.lower()
    if enc not in _CHANNELS:
        raise ImageDecodeError(f"unsupported image encoding {encoding!r}; expected one of {sorted(_CHANNELS)}")
    if width <= 0 or height <= 0:
        raise ImageDecodeError(f"empty image frame ({width}x{height})")
    _check_pixels(width, height, max_pixels)
    channels = _CHANNELS[enc]
    row_bytes = width * channels
    if step < row_bytes:
        raise ImageDecodeError(f"step {step} is smaller than width*channels = {row_bytes} for {enc}")
    if height * step > 4 * max_pixels:
        raise ImageDecodeError(
            f"image payload height*step = {height}*{step} bytes is over the limit of {4 * max_pixels} "
            f"(4 bytes per pixel of max_image_pixels {max_pixels})"
        )
    buf = np.frombuffer(bytes(data) if isinstance(data, list) else data, dtype=np.uint8)
    if buf.size != height * step:
        raise ImageDecodeError(
            f"image data has {buf.size} bytes but height*step = {height}*{step} = {height * step} were expected"
        )
    img = buf.reshape(height, step)[:, :row_bytes].reshape(height, width, channels)
    if enc == "rgb8":
        return np.ascontiguousarray(img)
    if enc == "bgr8":
        return np.ascontiguousarray(img[:, :, ::-1])
    if enc == "rgba8":
        return np.ascontiguousarray(img[:, :, :3])
    if enc == "bgra8":
        return np.ascontiguousarray(img[:, :, 2::-1])
    return np.ascontiguousarray(np.repeat(img, 3, axis=2))


def _jpeg_size(buf: memoryview) -> tuple[int, int]:
    """(width, height) from a JPEG's frame header, walking the marker segments that precede it."""
    i = 2
    while i + 4 <= len(buf):
        if buf[i] != 0xFF:
            raise ImageDecodeError(f"corrupt JPEG: no marker at byte {i}")
        marker = buf[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
        elif marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
        elif marker in (0xD9, 0xDA):  # end of image, start of scan
            break
        elif marker in _JPEG_SOF and i + 9 <= len(buf):  # length(2) precision(1) height(2) width(2)
            return int.from_bytes(buf[i + 7 : i + 9], "big"), int.from_bytes(buf[i + 5 : i + 7], "big")
        else:
            i += 2 + int.from_bytes(buf[i + 2 : i + 4], "big")
    raise ImageDecodeError("corrupt JPEG: no frame header (SOF) before the image data")


def declared_size(data: bytes | bytearray | memoryview | np.ndarray) -> tuple[int, int]:
    """(width, height) a PNG or JPEG declares in its header, read without decoding anything. Not
    Pillow's lazy open: it refuses a bomb itself (DecompressionBombError, against a process-wide
    limit) without telling the size, and cv2 has no header-only read."""
    buf = memoryview(np.frombuffer(data, dtype=np.uint8))
    if bytes(buf[:8]) == _PNG_SIGNATURE:
        if len(buf) < 24 or bytes(buf[12:16]) != b"IHDR":
            raise ImageDecodeError("corrupt PNG: no IHDR header")
        return int.from_bytes(buf[16:20], "big"), int.from_bytes(buf[20:24], "big")
    if bytes(buf[:2]) == b"\xff\xd8":
        return _jpeg_size(buf)
    raise ImageDecodeError(f"could not decode {len(buf)} bytes: neither a PNG nor a JPEG signature")


def decode_compressed(
    fmt: str, data: bytes | bytearray | memoryview, max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """Return an HxWx3 uint8 RGB array from a sensor_msgs/CompressedImage payload (jpeg or png).

    `format` may be the plain codec name or image_transport's "rgb8; jpeg compressed bgr8" form.
    The header's declared size is checked against max_pixels before decoding.
    """
    f = fmt.lower()
    if "jpeg" not in f and "jpg" not in f and "png" not in f:
        raise ImageDecodeError(f"unsupported compressed image format {fmt!r}; expected jpeg or png")
    buf = np.frombuffer(data, dtype=np.uint8)
    if buf.size == 0:
        raise ImageDecodeError("empty compressed image (0 bytes)")
    width, height = declared_size(buf)
    if width <= 0 or height <= 0:
        raise ImageDecodeError(f"compressed image declares an empty size ({width}x{height})")
    _check_pixels(width, height, max_pixels)
    try:
        bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    except cv2.error as e:  # OpenCV's own checks (its pixel limit, a broken header)
        raise ImageDecodeError(f"could not decode {buf.size} bytes as {fmt!r}: {str(e).strip()}") from e
    if bgr is None or bgr.size == 0:
        raise ImageDecodeError(f"could not decode {buf.size} bytes as {fmt!r}")
    return np.ascontiguousarray(bgr[:, :, ::-1])


def encode_raw_rgb8(rgb: np.ndarray) -> tuple[str, int, int, int, bytes]:
    """Inverse of decode_raw for rgb8: (encoding, width, height, step, data); used by tests and the bench."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    h, w = rgb.shape[:2]
    return "rgb8", w, h, w * 3, rgb.tobytes()


def encode_jpeg(rgb: np.ndarray, quality: int = 90) -> bytes:
    """JPEG bytes of an RGB image (for crops and CompressedImage test streams)."""
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ImageDecodeError("JPEG encoding failed")
    return buf.tobytes()
