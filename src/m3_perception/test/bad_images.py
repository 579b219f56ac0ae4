"""Small images that declare huge sizes (issue 13): real JPEG/PNG files with patched headers, and a
complete PNG of zeros, which compresses to almost nothing."""

from __future__ import annotations

import struct
import zlib

import cv2
import numpy as np

from m3_perception.image_codec import encode_jpeg


def jpeg_claiming(width: int, height: int) -> bytes:
    """A real 64x48 JPEG whose frame header (SOF0) is patched to declare width x height."""
    data = bytearray(encode_jpeg(np.full((48, 64, 3), 90, np.uint8), 90))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def png_claiming(width: int, height: int) -> bytes:
    """A real 64x48 PNG whose IHDR is patched to declare width x height, its CRC fixed (libpng checks it)."""
    _, buf = cv2.imencode(".png", np.full((48, 64, 3), 90, np.uint8))
    data = bytearray(buf.tobytes())
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))  # CRC over chunk type + IHDR data
    return bytes(data)


def black_png(width: int, height: int) -> bytes:
    """A complete grey-scale PNG of zeros: 16000x16000 is 249 KB and decodes to 768 MB of RGB."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    deflate, rows = zlib.compressobj(9), bytes((width + 1) * 1000)  # each row: filter byte 0, then pixels
    idat = b"".join(deflate.compress(rows[: (width + 1) * min(1000, height - y)]) for y in range(0, height, 1000))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat + deflate.flush()) + chunk(b"IEND", b"")
