"""Whether a stretch of 16 kHz audio came through a narrow-band (telephone) channel.

A phone call, a speakerphone or an 8 kHz microphone delivers nothing above ~3.4-4 kHz. Speaker
embeddings of such speech sit closer together (CAM++ on the real conversation speakers through
telephone.py's G.711 channel: different speakers p90 0.45, max 0.56, against 0.18 / 0.34 wide-band;
one speaker's pieces p10 0.57 against 0.54), so voices are matched with a threshold of their own
(`voice_match_cosine_narrowband`). Measured share of spectral energy above 3.8 kHz: 1e-5 through the
telephone channel; 5e-3 to 8e-2 for the real readers; 1.1e-3 to 7e-3 for Festival and espeak voices.
"""

from __future__ import annotations

import numpy as np

RATE = 16000
EDGE_HZ = 3800.0  # a telephone band ends at 3.4 kHz, an 8 kHz stream at 4 kHz
MAX_HIGH_SHARE = 2e-4  # below this share of energy above EDGE_HZ, the audio is narrow-band
MIN_ENERGY = 1e-8  # mean square below this is silence: no band can be told


def high_band_share(samples: np.ndarray) -> float:
    """Share of the signal's energy above EDGE_HZ (0 for silence)."""
    x = np.asarray(samples, np.float64)
    if len(x) < 256 or float(np.mean(x * x)) < MIN_ENERGY:
        return 0.0
    power = np.abs(np.fft.rfft(x * np.hanning(len(x)))) ** 2
    freqs = np.fft.rfftfreq(len(x), 1.0 / RATE)
    return float(power[freqs > EDGE_HZ].sum() / max(float(power.sum()), 1e-30))


def is_narrowband(samples: np.ndarray) -> bool:
    """True when the audio holds speech energy but (almost) none above EDGE_HZ."""
    x = np.asarray(samples, np.float64)
    if len(x) < 256 or float(np.mean(x * x)) < MIN_ENERGY:
        return False
    return high_band_share(x) < MAX_HIGH_SHARE
