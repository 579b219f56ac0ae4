"""Speech-to-text with faster-whisper on CTranslate2 (`asr_backend: faster_whisper`, the default).

Whisper base from registry packages gets 2.2 % WER on real read speech on 2 CPU cores (int8,
greedy), against pocketsphinx's 30 %; see whisper_models for where the weights come from and
how they are checked. Per utterance (one VAD segment or speaker turn):

- language: forced by `language`, else Whisper's own detection (English-only models report "en");
- confidence = exp(token-weighted mean of the segments' avg_logprob), the decoder's mean token
  log-probability as openai-whisper reports it; 0 when nothing was recognised;
- Whisper's own silence guard stays on (a segment with no_speech_prob > 0.6 and a low
  log-probability is dropped), so noise does not become "Thank you." in memory;
- word timestamps (optional) are offsets from the first sample handed in [s];
- the encoder reads the utterance and 1 s after it, at least `window_s` (faster-whisper pads every
  input to 30 s of mel frames; CTranslate2's encoder takes fewer, as whisper.cpp's `audio_ctx` does).
  At 10 s a 3 s turn costs about a third of the time, with the same words on real speech here, but
  Whisper, trained on 30 s windows, can then loop on a line (README of m3_perception, Encoder
  window): a shortened window's transcript that repeats itself (Whisper's own compression-ratio test,
  > 2.4), says more words than the audio can hold, or stops after fewer words than anyone says in
  that time ("Did" for 1.7 s of "Did you mark the history essays?") is decoded again over the full
  30 s, so a slip costs one more decode, not the line. Below 5 s Whisper mishears short turns.
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

from m3_perception.speech.pocketsphinx_asr import Transcript, WordTiming
from m3_perception.speech.whisper_models import resolve
from m3_runtime.audio_codec import checked_mono

DEVICES = ("auto", "cpu", "cuda")
COMPUTE_TYPES = ("auto", "int8", "int8_float16", "int8_float32", "float16", "bfloat16", "float32")
FRAMES_PER_S = 100  # Whisper's mel frames (hop 160 samples at 16 kHz)
WHISPER_FRAMES = 3000  # Whisper's fixed 30 s window
MIN_WINDOW_S, MAX_WINDOW_S = 5.0, 30.0
MAX_COMPRESSION_RATIO = 2.4  # Whisper's own repetition test (gzip ratio of a segment's text)
MAX_WORDS_PER_S = 6.0  # fast speech is ~4 words/s: more is a decoder repeating itself
# Fewer words than this a second is a decoder that stopped early: the slowest real phrases here (Beckett's
# "Ever failed.", Endgame's "Yes.", the pocketsphinx cards), with 0.2 s around them, say 1.4-2 words/s.
MIN_WORDS_PER_S = 0.75
SILENCE_PEAK = 1e-4  # samples in [-1, 1]: below -80 dBFS at every sample there is nothing to hear
TOKENS_PER_S = 12  # a windowed decode stops here (Whisper writes ~1.3 tokens a word): a loop costs little


def _cuda_available() -> bool:
    import ctranslate2

    return ctranslate2.get_cuda_device_count() > 0


def encoder_frames(samples: int, window_s: float) -> int:
    """Mel frames the encoder reads for an utterance of `samples` (16 kHz): the utterance and 1 s more,
    at least `window_s`, at most Whisper's 30 s (longer audio is decoded 30 s at a time); even, since
    the encoder's convolutions halve it."""
    frames = max(round(window_s * FRAMES_PER_S), math.ceil(samples * FRAMES_PER_S / 16000) + FRAMES_PER_S)
    frames = min(WHISPER_FRAMES, frames)
    return frames + frames % 2


@functools.cache
def _windowed_model_class() -> type:
    """faster-whisper's WhisperModel whose encoder reads `frames` mel frames instead of all 3000 it is
    handed (the rest is padding: the silence faster-whisper appends to every input)."""
    from faster_whisper import WhisperModel

    class WindowedWhisperModel(WhisperModel):
        frames = WHISPER_FRAMES

        def encode(self, features: np.ndarray):  # every encoder pass of transcribe() comes here
            return super().encode(features[..., : self.frames])

    return WindowedWhisperModel


class FasterWhisperAsr:
    """One CTranslate2 Whisper reused for every utterance (call from one worker)."""

    def __init__(
        self,
        model: str = "base",
        device: str = "auto",
        compute_type: str = "auto",
        threads: int = 0,
        language: str = "",
        beam_size: int = 1,
        word_timestamps: bool = False,
        window_s: float = 10.0,
    ) -> None:
        """`model`: base | tiny.en | a CTranslate2 Whisper directory. `device` auto picks CUDA when
        CTranslate2 sees a GPU; `compute_type` auto = int8 on CPU, float16 on CUDA. `threads`: CPU
        threads for one decode (0: all cores, at most 4). `window_s`: the least audio the encoder
        reads per utterance (5-30 s; 30: Whisper's fixed window; 10, the node's default)."""
        if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
            raise ValueError(f"asr_window_s must be {MIN_WINDOW_S:g}..{MAX_WINDOW_S:g} s, got {window_s}")
        if device not in DEVICES:
            raise ValueError(f"asr_device must be one of {DEVICES}, got {device!r}")
        if compute_type not in COMPUTE_TYPES:
            raise ValueError(f"asr_compute_type must be one of {COMPUTE_TYPES}, got {compute_type!r}")
        if not 1 <= beam_size <= 16:
            raise ValueError(f"asr_beam_size must be 1..16, got {beam_size}")
        if device == "cuda" and not _cuda_available():
            raise ValueError("asr_device 'cuda' asked for, but CTranslate2 sees no CUDA device")
        self.device = "cuda" if device == "cuda" or (device == "auto" and _cuda_available()) else "cpu"
        self.compute_type = compute_type if compute_type != "auto" else ("float16" if self.device == "cuda" else "int8")
        resolved = resolve(model)
        self.description = resolved.description
        self.window_s = window_s
        self._model = _windowed_model_class()(
            resolved.path,
            device=self.device,
            compute_type=self.compute_type,
            cpu_threads=threads or min(4, os.cpu_count() or 1),
            local_files_only=True,
            files=resolved.files,
        )
        self.multilingual = bool(self._model.model.is_multilingual)
        if language and not self.multilingual and language != "en":
            raise ValueError(f"{self.description} is English-only; asr_language {language!r} is not possible")
        if language and self.multilingual and language not in self._model.supported_languages:
            raise ValueError(f"Whisper knows no language {language!r}; use a code such as en, de, fr, zh")
        self.language = language if self.multilingual else "en"
        self.beam_size = beam_size
        self.word_timestamps = word_timestamps
        self.redecoded = 0  # windowed transcripts that slipped (repeated themselves, stopped early): decoded at 30 s
        self.transcribe(np.zeros(16000, np.float32))  # first call sets CTranslate2 up, not the first utterance

    def transcribe(self, samples: np.ndarray) -> Transcript:
        x = checked_mono(samples)
        if not len(x) or float(np.max(np.abs(x))) < SILENCE_PEAK:
            # Digital silence holds no words; decoded, Whisper base may make some up on some CPUs
            # (all zeros became "Yn yw'n yw'n ..." on one machine: the language guess decides what it hears).
            return Transcript("", 0.0, self.language or "en", ())
        frames = encoder_frames(len(x), self.window_s)
        transcript, degenerate = self._decode(x, frames)
        if degenerate and frames < WHISPER_FRAMES:
            self.redecoded += 1
            transcript, _ = self._decode(x, WHISPER_FRAMES)
        return transcript

    def _decode(self, x: np.ndarray, frames: int) -> tuple[Transcript, bool]:
        """The transcript with the encoder reading `frames` mel frames, and whether it slipped (`_slipped`)."""
        self._model.frames = frames
        seconds = len(x) / 16000
        cap = int(TOKENS_PER_S * seconds) + 16 if frames < WHISPER_FRAMES else None
        segments, info = self._model.transcribe(
            x,
            max_new_tokens=cap,
            language=self.language or None,
            beam_size=self.beam_size,
            word_timestamps=self.word_timestamps,
            # An utterance is one short VAD segment: no timestamp tokens to predict, which also hears
            # better (synthetic voices: WER 0.060 -> 0.045; real LibriVox unchanged; README).
            without_timestamps=not self.word_timestamps,
            condition_on_previous_text=False,  # an utterance is short; earlier text only invites repetition
            vad_filter=False,  # the voice pipeline has cut the speech already
        )
        kept, words = [], []
        for seg in segments:  # a generator: decoding happens here
            if seg.text.strip():
                kept.append(seg)
            words.extend(
                WordTiming(w.word.strip(), float(w.start), float(w.end), float(w.probability)) for w in seg.words or ()
            )
        text = " ".join(seg.text.strip() for seg in kept)
        tokens = sum(max(1, len(seg.tokens)) for seg in kept)
        conf = math.exp(sum(seg.avg_logprob * max(1, len(seg.tokens)) for seg in kept) / tokens) if tokens else 0.0
        language = info.language if self.multilingual else "en"
        transcript = Transcript(text, min(1.0, max(0.0, conf)), language, tuple(words))
        return transcript, _slipped(kept, text, seconds, cap)


def _slipped(segments: list, text: str, seconds: float, cap: int | None) -> bool:
    """Whether a transcript repeats itself (a segment that compresses too well, Whisper's own test, or
    ran into the token cap; more words than `seconds` of speech can hold) or stopped early (some words,
    but fewer than anyone says in `seconds`; none at all is silence, not a slip)."""
    words = len(text.split())
    return (
        any(s.compression_ratio > MAX_COMPRESSION_RATIO or (cap is not None and len(s.tokens) >= cap) for s in segments)
        or words > MAX_WORDS_PER_S * seconds + 4
        or 0 < words < MIN_WORDS_PER_S * seconds
    )
