"""Decode camera messages (sensor_msgs/Image, CompressedImage fields) into RGB numpy arrays.

Plain module (no rclpy) so the conversions are unit-testable; the node passes message fields in.
"""

from __future__ import annotations

import cv2
import numpy as np

_CHANNELS = {"rgb8": 3, "bgr8": 3, "mono8": 1, "rgba8": 4, "bgra8": 4}


class ImageDecodeError(ValueError):
    """A camera frame that cannot be turned into an RGB image; the message says why."""


def decode_raw(encoding: str, width: int, height: int, step: int, data: bytes | bytearray | memoryview) -> np.ndarray:
    """Return an HxWx3 uint8 RGB copy of a sensor_msgs/Image payload.

    Rows may be padded (step > width*channels); padding is dropped.
    """
    enc = encoding.lower()
    if enc not in _CHANNELS:
        raise ImageDecodeError(f"unsupported image encoding {encoding!r}; expected one of {sorted(_CHANNELS)}")
    if width <= 0 or height <= 0:
        raise ImageDecodeError(f"empty image frame ({width}x{height})")
    channels = _CHANNELS[enc]
    row_bytes = width * channels
    if step < row_bytes:
        raise ImageDecodeError(f"step {step} is smaller than width*channels = {row_bytes} for {enc}")
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


def decode_compressed(fmt: str, data: bytes | bytearray | memoryview) -> np.ndarray:
    """Return an HxWx3 uint8 RGB array from a sensor_msgs/CompressedImage payload (jpeg or png).

    `format` may be the plain codec name or image_transport's "rgb8; jpeg compressed bgr8" form.
    """
    f = fmt.lower()
    if "jpeg" not in f and "jpg" not in f and "png" not in f:
        raise ImageDecodeError(f"unsupported compressed image format {fmt!r}; expected jpeg or png")
    buf = np.frombuffer(data, dtype=np.uint8)
    if buf.size == 0:
        raise ImageDecodeError("empty compressed image (0 bytes)")
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR)
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
