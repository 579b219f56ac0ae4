"""Speech-to-text with a local Whisper through transformers (`asr_backend: whisper`).

The model directory is what `save_pretrained` writes for `WhisperForConditionalGeneration` and
`WhisperProcessor` (config.json, generation_config.json, model weights, the feature extractor's
and the tokenizer's files), e.g. a snapshot of openai/whisper-small. Nothing is downloaded
(`local_files_only`). Per utterance:

- the encoder runs once; a multilingual model then detects the language from it (Whisper's own
  language-token prediction, transformers' `detect_language`), unless `language` forces one, and
  generation reuses the encoder output. English-only models (`*.en`) report "en";
- confidence = exp(mean log-probability of the generated tokens, end-of-text included), the
  per-token probabilities after Whisper's logit processors: the same quantity as openai-whisper's
  `avg_logprob`, which the OpenAI back-end turns into its confidence the same way. 0 when no text;
- utterances longer than Whisper's 30 s window are transcribed window by window.

Real Whisper weights were not available where this was written (no network); the tests run a
tiny randomly initialised Whisper with a locally built tokenizer that has Whisper's real special
tokens, so they prove the loading, the generate() path, language and confidence handling and the
errors, not the transcription accuracy.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from m3_perception.model_files import ModelFileMissing
from m3_perception.speech.pocketsphinx_asr import Transcript
from m3_runtime.audio_codec import checked_mono

RATE = 16000
WINDOW_S = 30  # Whisper's input window
# What a save_pretrained directory must hold: (what, any of these file names).
REQUIRED_FILES = (
    ("model configuration", ("config.json",)),
    ("generation configuration", ("generation_config.json",)),
    ("model weights", ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")),  # noqa: E501
    ("feature extractor", ("preprocessor_config.json", "processor_config.json")),
    ("tokenizer", ("tokenizer.json", "vocab.json")),
)  # fmt: skip


def check_model_dir(model_dir: str | Path) -> Path:
    """The directory, or ModelFileMissing naming the first thing it lacks."""
    if not str(model_dir):
        raise ModelFileMissing("asr_backend 'whisper' needs asr_model_dir: a Whisper save_pretrained directory")
    d = Path(model_dir).expanduser()
    if not d.is_dir():
        raise ModelFileMissing(f"Whisper model directory not found: {d}")
    for what, names in REQUIRED_FILES:
        if not any((d / n).is_file() for n in names):
            raise ModelFileMissing(f"Whisper {what} file not found in {d}: expected {' or '.join(names)}")
    return d


class WhisperAsr:
    """One Whisper model reused for every utterance (call from one worker thread)."""

    def __init__(self, model_dir: str | Path, language: str = "", threads: int = 0, device: str = "auto") -> None:
        """`language`: code to force (e.g. "en"); empty = detect per utterance.
        `threads`: torch CPU threads (process-wide; 0 leaves torch's setting, e.g. resemblyzer's 1).
        `device`: 'auto' (CUDA when available), 'cpu' or 'cuda'."""
        import torch
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        d = check_model_dir(model_dir)
        if threads > 0:
            torch.set_num_threads(threads)
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"Whisper device must be 'auto', 'cpu' or 'cuda', got {device!r}")
        if device == "cuda" and not torch.cuda.is_available():
            raise ValueError("Whisper device 'cuda' asked for, but torch sees no CUDA device")
        self.device = "cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu"
        self.path = d
        self._processor = WhisperProcessor.from_pretrained(str(d), local_files_only=True)
        self._model = WhisperForConditionalGeneration.from_pretrained(str(d), local_files_only=True)
        self._model.to(self.device).eval()
        gen = self._model.generation_config
        self._lang_to_id: dict[str, int] = dict(getattr(gen, "lang_to_id", None) or {})
        self.multilingual = bool(getattr(gen, "is_multilingual", False)) and bool(self._lang_to_id)
        self._id_to_lang = {i: tok.strip("<|>") for tok, i in self._lang_to_id.items()}
        self._eos = gen.eos_token_id
        if language:
            if self.multilingual and f"<|{language}|>" not in self._lang_to_id:
                codes = sorted(self._id_to_lang.values())
                raise ValueError(f"Whisper in {d} has no language {language!r}; it knows {', '.join(codes)}")
            if not self.multilingual and language != "en":
                raise ValueError(f"Whisper in {d} is English-only; asr_language {language!r} is not possible")
        self.language = language
        # Generation may fill the decoder's positions (448 for real Whisper), prompt included; set
        # here, not per call, as transformers warns on every call given both max_length and max_new_tokens.
        gen.max_length = self._model.config.max_target_positions
        gen.max_new_tokens = None
        self.transcribe(np.zeros(RATE, np.float32))  # first call sets torch up, not on the first utterance

    def transcribe(self, samples: np.ndarray) -> Transcript:
        x = checked_mono(samples)
        texts, logprobs, language = [], [], ""
        for start in range(0, max(1, len(x)), WINDOW_S * RATE):
            text, lps, lang = self._window(x[start : start + WINDOW_S * RATE])
            texts.append(text)
            logprobs.extend(lps)
            language = language or lang
        text = " ".join(t for t in texts if t)
        conf = math.exp(float(np.mean(logprobs))) if text and logprobs else 0.0
        return Transcript(text, min(1.0, max(0.0, conf)), language or "en")

    def _window(self, x: np.ndarray) -> tuple[str, list[float], str]:
        """(text, log-probabilities of the generated tokens, language code) of ≤ 30 s of audio."""
        import torch

        feats = self._processor.feature_extractor(x, sampling_rate=RATE, return_tensors="pt").input_features
        feats = feats.to(self.device, dtype=self._model.dtype)
        kwargs = {"task": "transcribe"} if self.multilingual else {}
        if self.multilingual and self.language:
            kwargs["language"] = self.language
        with torch.inference_mode():
            encoded = self._model.get_encoder()(feats)
            out = self._model.generate(
                encoder_outputs=encoded,
                return_dict_in_generate=True,
                output_scores=True,
                **kwargs,
            )
            scores = self._model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
        seq = out.sequences[0].tolist()
        generated = seq[len(seq) - len(out.scores) :] if out.scores else []
        eos = set(self._eos) if isinstance(self._eos, list) else {self._eos}
        n = next((i + 1 for i, t in enumerate(generated) if t in eos), len(generated))  # up to end-of-text
        text = self._processor.tokenizer.decode(generated[:n], skip_special_tokens=True).strip()
        language = "en"
        if self.multilingual:
            # The decoder prompt is <|startoftranscript|> <|lang|> <|transcribe|> ...: the detected or forced language.
            prompt = seq[: len(seq) - len(generated)]
            found = [self._id_to_lang[t] for t in prompt if t in self._id_to_lang]
            if not found:
                raise RuntimeError(f"Whisper generated no language token in its prompt {prompt}")
            language = found[0]
        return text, [float(v) for v in scores[:n].float().cpu()], language
