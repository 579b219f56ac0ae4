"""Kaldi-compatible log mel filterbank features in numpy (the input of 3D-Speaker's ERes2NetV2).

Why hand-written: 3D-Speaker computes its features with `torchaudio.compliance.kaldi.fbank`, and
torchaudio is not installed here (nor needed elsewhere). librosa's mel filters are not a
substitute: they are triangles in Hz on Slaney's or HTK's mel scale, without Kaldi's per-frame
DC removal, pre-emphasis and Povey window. This module reproduces torchaudio's Kaldi fbank with
the options 3D-Speaker uses (its defaults: 25 ms frames every 10 ms, snip_edges, DC offset
removed per frame, pre-emphasis 0.97, Povey window, FFT padded to a power of two, power
spectrum, 80 mel bins from 20 Hz to Nyquist with triangles linear on Kaldi's mel scale
1127 ln(1 + f/700), natural log floored at float32 epsilon, no dither, no energy column).
Samples are floats in [-1, 1] as torchaudio.load gives them (3D-Speaker does not rescale).
"""

from __future__ import annotations

import functools

import numpy as np

EPSILON = float(np.finfo(np.float32).eps)  # Kaldi's floor before the log


def _mel(f: np.ndarray | float) -> np.ndarray:
    return 1127.0 * np.log(1.0 + np.asarray(f, np.float64) / 700.0)


def _inverse_mel(m: np.ndarray | float) -> np.ndarray:
    return 700.0 * (np.exp(np.asarray(m, np.float64) / 1127.0) - 1.0)


@functools.lru_cache(maxsize=8)
def mel_banks(num_bins: int, n_fft: int, sample_rate: float, low_freq: float = 20.0, high_freq: float = 0.0):
    """(num_bins, n_fft // 2 + 1) Kaldi triangular filters and their centre frequencies [Hz].

    Triangles are linear in mel between the neighbouring centres; the Nyquist bin gets weight 0
    (as Kaldi and torchaudio do).
    """
    nyquist = 0.5 * sample_rate
    high = high_freq + nyquist if high_freq <= 0.0 else high_freq
    if not (0.0 <= low_freq < nyquist and 0.0 < high <= nyquist and low_freq < high):
        raise ValueError(f"bad mel range {low_freq}-{high} Hz for Nyquist {nyquist} Hz")
    mel_low, mel_high = _mel(low_freq), _mel(high)
    delta = (mel_high - mel_low) / (num_bins + 1)
    b = np.arange(num_bins)[:, None]
    left, center, right = mel_low + b * delta, mel_low + (b + 1.0) * delta, mel_low + (b + 2.0) * delta
    mel = _mel(sample_rate / n_fft * np.arange(n_fft // 2))[None, :]
    weights = np.maximum(0.0, np.minimum((mel - left) / (center - left), (right - mel) / (right - center)))
    weights = np.pad(weights, ((0, 0), (0, 1)))  # Nyquist column
    return weights, _inverse_mel(center[:, 0])


@functools.lru_cache(maxsize=8)
def povey_window(size: int) -> np.ndarray:
    """Kaldi's Povey window: a symmetric Hann window to the power 0.85."""
    n = np.arange(size, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * n / (size - 1))) ** 0.85


def kaldi_fbank(
    samples: np.ndarray,
    sample_rate: int = 16000,
    num_mel_bins: int = 80,
    frame_length_ms: float = 25.0,
    frame_shift_ms: float = 10.0,
    preemphasis: float = 0.97,
    low_freq: float = 20.0,
    high_freq: float = 0.0,
) -> np.ndarray:
    """(frames, num_mel_bins) float32 log mel energies of mono samples, as torchaudio's kaldi.fbank."""
    x = np.asarray(samples, np.float64)
    if x.ndim != 1:
        raise ValueError(f"expected mono samples (1-D), got shape {x.shape}")
    size = int(sample_rate * frame_length_ms / 1000.0)
    shift = int(sample_rate * frame_shift_ms / 1000.0)
    if len(x) < size:
        raise ValueError(f"need at least one {frame_length_ms} ms frame ({size} samples), got {len(x)}")
    n_fft = 1 << (size - 1).bit_length()
    count = 1 + (len(x) - size) // shift
    frames = np.lib.stride_tricks.sliding_window_view(x, size)[::shift][:count].copy()
    frames -= frames.mean(axis=1, keepdims=True)
    if preemphasis:
        # x[j] -= k * x[j - 1], with x[-1] = x[0] (Kaldi replicates the first sample)
        frames[:, 1:] -= preemphasis * frames[:, :-1].copy()
        frames[:, 0] -= preemphasis * frames[:, 0]
    frames *= povey_window(size)
    power = np.abs(np.fft.rfft(frames, n=n_fft)) ** 2
    weights, _ = mel_banks(num_mel_bins, n_fft, float(sample_rate), low_freq, high_freq)
    return np.log(np.maximum(power @ weights.T, EPSILON)).astype(np.float32)


def mean_normalised_fbank(samples: np.ndarray, sample_rate: int = 16000, num_mel_bins: int = 80) -> np.ndarray:
    """3D-Speaker's speaker-embedding input: Kaldi fbank minus its mean over time (FBank(mean_nor=True))."""
    feat = kaldi_fbank(samples, sample_rate, num_mel_bins)
    return feat - feat.mean(axis=0, keepdims=True)
