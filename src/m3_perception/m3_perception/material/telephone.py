"""A telephone channel for test audio: 300–3400 Hz band, 8 kHz, 8-bit G.711 µ-law, back to 16 kHz.

The failing real case of issue 20 was a phone call; this turns any 16 kHz stream into what a
narrow-band call delivers, so the voice pipeline can be measured on it. `audioop` (which had
lin2ulaw/ulaw2lin) is gone from Python 3.13, so the µ-law codec is written here in numpy, bit for
bit the ITU-T G.711 codec that audioop used (checked against audioop on all 65536 inputs).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import butter, resample_poly, sosfiltfilt

RATE = 16000
PHONE_RATE = 8000
BAND_HZ = (300.0, 3400.0)
_BIAS = 0x21  # on 14-bit samples (0x84 on 16-bit)
_CLIP = 8159


def mulaw_encode(x: np.ndarray) -> np.ndarray:
    """float samples in [-1, 1] → G.711 µ-law bytes (uint8, bits inverted as on the wire).

    As G.711 (and audioop) does it: 14-bit linear (arithmetic shift, so negatives round down), bias
    33, clip 8159, segment = position of the highest bit, 4 mantissa bits."""
    s = np.round(np.clip(np.asarray(x, np.float64), -1.0, 1.0) * 32767.0).astype(np.int32) >> 2
    sign = np.where(s < 0, 0x80, 0)
    mag = np.minimum(np.abs(s), _CLIP) + _BIAS  # 33 .. 8192: bits 5..12 hold the segment
    exponent = np.floor(np.log2(mag >> 5)).astype(np.int32)  # mag >> 5 is 1 .. 256: segment 0 .. 8
    code = np.where(exponent > 7, 0x7F, (np.minimum(exponent, 7) << 4) | ((mag >> (exponent + 1)) & 0x0F))
    return (~(sign | code) & 0xFF).astype(np.uint8)


def mulaw_decode(codes: np.ndarray) -> np.ndarray:
    """G.711 µ-law bytes → float32 samples in [-1, 1] (16-bit scale, as audioop.ulaw2lin)."""
    c = ~np.asarray(codes, np.int32) & 0xFF
    exponent, mantissa = (c >> 4) & 0x07, c & 0x0F
    mag = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return (np.where(c & 0x80, -mag, mag) / 32768.0).astype(np.float32)


def telephone_channel(samples: np.ndarray) -> np.ndarray:
    """16 kHz samples as a narrow-band call delivers them, at 16 kHz again (the pipeline's rate).

    A zero-phase 300–3400 Hz band-pass (so reference turn times stay exact), 8 kHz, µ-law encoded
    and decoded, then 16 kHz; the polyphase resamplers' low-pass keeps the result below 4 kHz."""
    sos = butter(6, BAND_HZ, btype="bandpass", fs=RATE, output="sos")
    band = sosfiltfilt(sos, np.asarray(samples, np.float64))
    narrow = resample_poly(band, PHONE_RATE, RATE)
    coded = mulaw_decode(mulaw_encode(narrow)).astype(np.float64)
    out = resample_poly(coded, RATE, PHONE_RATE)[: len(samples)]
    return np.clip(out, -1.0, 1.0).astype(np.float32)
