"""Test/bench material from installed packages: real face photographs and synthesised speech,
and small images that declare huge sizes (issue 13's decompression bombs).

Faces: skimage's astronaut (Eileen Collins), matplotlib's Grace Hopper, skimage's cameraman.
Voices: Festival (cmu_us_slt_arctic_hts, kal_diphone) and espeak-ng, run as subprocesses.
"""

from __future__ import annotations

import functools
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import cv2
import numpy as np

from m3_runtime.audio_codec import resample
from m3_runtime.image_codec import encode_jpeg

# Portrait crops (y0, y1, x0, x1) around each face, so faces can be placed on a canvas.
_CROPS = {"astronaut": (30, 230, 130, 320), "hopper": (80, 400, 110, 430), "cameraman": (60, 260, 120, 320)}
FESTIVAL_VOICES = {"slt": "voice_cmu_us_slt_arctic_hts", "kal": "voice_kal_diphone"}


def face_photos() -> dict[str, np.ndarray]:
    """RGB head-and-shoulders crops of three different real people."""
    import matplotlib.cbook
    import skimage.data
    from PIL import Image

    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        hopper = np.asarray(Image.open(f).convert("RGB"))
    full = {
        "astronaut": skimage.data.astronaut(),
        "hopper": hopper,
        "cameraman": np.repeat(skimage.data.camera()[:, :, None], 3, axis=2),
    }
    return {k: np.ascontiguousarray(full[k][y0:y1, x0:x1]) for k, (y0, y1, x0, x1) in _CROPS.items()}


def compose(
    photos: dict[str, np.ndarray],
    placements: list[tuple[str, int, int, float]],
    size: tuple[int, int] = (480, 640),
    background: int = 90,
) -> np.ndarray:
    """Canvas (HxW) with each (name, x, y, scale) photo pasted at x, y; later ones on top."""
    import cv2

    canvas = np.full((size[0], size[1], 3), background, np.uint8)
    for name, x, y, scale in placements:
        p = photos[name]
        if scale != 1.0:
            p = cv2.resize(p, (int(p.shape[1] * scale), int(p.shape[0] * scale)), interpolation=cv2.INTER_AREA)
        h = min(p.shape[0], size[0] - y)
        w = min(p.shape[1], size[1] - x)
        canvas[y : y + h, x : x + w] = p[:h, :w]
    return canvas


@functools.cache
def espeak_voice(name: str) -> str:
    """The `-v` argument that makes espeak-ng speak `name` ("en-gb", "en-us+m3", "gmw/en+f3").

    espeak-ng 1.51 drops a variant given after some language names: "en-gb+f3" speaks the plain
    male en-gb voice (median F0 101 Hz, as "en-gb"), where "en-us+f3" or the voice file "gmw/en+f3"
    speak the female variant (208 Hz). So a name with a variant is spoken as its voice file (the
    `espeak-ng --voices` row for that language, espeak's own voices before MBROLA ones) plus the variant.
    """
    language, plus, variant = name.partition("+")
    if not plus:
        return name
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise FileNotFoundError("espeak-ng not found: install the Debian package espeak-ng")
    listing = subprocess.run([exe, "--voices"], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in listing.splitlines()[1:]]
    files = sorted(
        (int(r[0]), r[4]) for r in rows if len(r) >= 5 and r[1] == language.lower() and not r[4].startswith("mb/")
    )
    return f"{files[0][1]}+{variant}" if files else name


def speak(text: str, voice: str) -> np.ndarray:
    """Mono float32 16 kHz speech: voice "slt"/"kal" (Festival) or "espeak:<name>" (espeak-ng)."""
    import soundfile

    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "out.wav"
        if voice.startswith("espeak"):
            exe = shutil.which("espeak-ng")
            if exe is None:
                raise FileNotFoundError("espeak-ng is not installed")
            name = espeak_voice(voice.partition(":")[2] or "en")
            subprocess.run([exe, "-v", name, "-w", str(wav), text], check=True, capture_output=True)
        else:
            exe = shutil.which("text2wave")
            if exe is None:
                raise FileNotFoundError("Festival's text2wave is not installed")
            subprocess.run(
                [exe, "-eval", f"({FESTIVAL_VOICES[voice]})", "-o", str(wav)],
                input=text.encode(),
                check=True,
                capture_output=True,
            )
        x, sr = soundfile.read(str(wav), dtype="float32", always_2d=True)
    return resample(x.mean(axis=1), sr)


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
