"""Whisper back-end (transformers) with a tiny randomly initialised Whisper.

Real Whisper weights are not available here (no network). The tests therefore save, in tmp_path,
a Whisper with tiny dimensions and random weights (WhisperConfig: d_model 32, one layer each) and
a tokenizer built locally with Whisper's real special tokens in their real order
(<|endoftext|>, <|startoftranscript|>, the language tokens, <|translate|>, <|transcribe|>,
<|startoflm|>, <|startofprev|>, <|nospeech|>, <|notimestamps|>, then the timestamps) over a
byte-level base vocabulary, in the save_pretrained layout. transformers' real generate() path
runs (language detection, forced prompt, logit processors). The transcripts are random bytes:
the tests check types, fields, the language and confidence arithmetic and the errors, not accuracy.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from m3_perception.model_files import ModelFileMissing
from m3_perception.speech.pocketsphinx_asr import Transcript
from m3_perception.speech.whisper_asr import WhisperAsr, check_model_dir


def _save_tiny_whisper(d: Path, multilingual: bool = True) -> Path:
    import torch
    from tokenizers import AddedToken
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    tok = WhisperTokenizer(
        vocab={c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}, merges=[]
    )  # + <|endoftext|>
    langs = [f"<|{c}|>" for c in LANGUAGES] if multilingual else []
    specials = ["<|startoftranscript|>", *langs, "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>"]
    specials += ["<|nospeech|>", "<|notimestamps|>"]
    tok.add_special_tokens(
        {"additional_special_tokens": [AddedToken(s, special=True, normalized=False) for s in specials]}
    )
    tok.add_tokens([AddedToken(f"<|{i * 0.02:.2f}|>", special=False, normalized=False) for i in range(1501)])
    ids = tok.convert_tokens_to_ids
    eot, sot = ids("<|endoftext|>"), ids("<|startoftranscript|>")
    assert (eot, sot) == (256, 257)  # as 50257, 50258 in the real vocabulary, offset by the smaller base
    config = WhisperConfig(
        vocab_size=len(tok), num_mel_bins=80, d_model=32, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=1500, max_target_positions=64, decoder_start_token_id=sot,
        bos_token_id=eot, eos_token_id=eot, pad_token_id=eot,
    )  # fmt: skip
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config)
    # As the real generation_config.json: no special or timestamp token is generated as text (here:
    # all of them but end-of-text), so the random model writes byte tokens.
    suppress = [i for i in range(sot, len(tok))]
    gen = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, max_length=64,
        no_timestamps_token_id=ids("<|notimestamps|>"), prev_sot_token_id=ids("<|startofprev|>"),
        suppress_tokens=suppress, begin_suppress_tokens=[], is_multilingual=multilingual,
    )  # fmt: skip
    if multilingual:
        gen.lang_to_id = {t: ids(t) for t in langs}
        gen.task_to_id = {"translate": ids("<|translate|>"), "transcribe": ids("<|transcribe|>")}
    model.generation_config = gen
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tok).save_pretrained(str(d))
    model.save_pretrained(str(d))
    return d


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return _save_tiny_whisper(tmp_path_factory.mktemp("whisper_tiny"))


@pytest.fixture(scope="module")
def asr(model_dir: Path) -> WhisperAsr:
    return WhisperAsr(model_dir)


@pytest.fixture(scope="module")
def audio() -> np.ndarray:
    return np.random.default_rng(0).normal(0, 0.1, 2 * 16000).astype(np.float32)


def test_transcript_fields_and_detected_language(asr: WhisperAsr, audio: np.ndarray) -> None:
    import torch

    t = asr.transcribe(audio)
    assert isinstance(t, Transcript) and isinstance(t.text, str) and t.text
    assert 0.0 < t.confidence <= 1.0
    # The language is Whisper's own language-token prediction for this audio.
    feats = asr._processor.feature_extractor(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.inference_mode():
        detected = int(asr._model.detect_language(feats)[0])
    assert t.language == asr._processor.tokenizer.convert_ids_to_tokens(detected).strip("<|>")
    assert asr.transcribe(audio) == t  # greedy decoding: deterministic


def test_confidence_is_the_mean_token_log_probability(asr: WhisperAsr, audio: np.ndarray) -> None:
    """Recomputed by teacher forcing the generated sequence through the model, with the same suppression."""
    import torch

    t = asr.transcribe(audio)
    feats = asr._processor.feature_extractor(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.no_grad():
        seq = asr._model.generate(feats, task="transcribe", return_dict_in_generate=True).sequences[0]
        logits = asr._model(input_features=feats, decoder_input_ids=seq[None, :-1]).logits[0].clone()
    logits[:, asr._model.generation_config.suppress_tokens] = -math.inf
    logp = torch.log_softmax(logits, dim=-1)
    tokens = asr._processor.tokenizer.convert_ids_to_tokens(seq[:4].tolist())
    assert tokens[0] == "<|startoftranscript|>" and tokens[2:] == ["<|transcribe|>", "<|notimestamps|>"]
    # The forced prompt (4 tokens) is not counted; every generated token is, end-of-text included.
    lps = [float(logp[i, int(seq[i + 1])]) for i in range(3, len(seq) - 1)]
    assert t.confidence == pytest.approx(math.exp(np.mean(lps)), rel=1e-4)


def test_forced_language_and_long_audio(model_dir: Path) -> None:
    asr = WhisperAsr(model_dir, language="de")
    long = np.random.default_rng(1).normal(0, 0.1, 35 * 16000).astype(np.float32)  # two 30 s windows
    t = asr.transcribe(long)
    assert t.language == "de" and t.text and 0.0 < t.confidence <= 1.0
    with pytest.raises(ValueError, match="no language 'xx'"):
        WhisperAsr(model_dir, language="xx")


def test_english_only_model(tmp_path: Path, audio: np.ndarray) -> None:
    asr = WhisperAsr(_save_tiny_whisper(tmp_path / "tiny_en", multilingual=False))
    assert not asr.multilingual
    t = asr.transcribe(audio)
    assert t.language == "en" and t.text
    with pytest.raises(ValueError, match="English-only"):
        WhisperAsr(tmp_path / "tiny_en", language="fr")


def test_bad_input(asr: WhisperAsr) -> None:
    with pytest.raises(ValueError, match="mono"):
        asr.transcribe(np.zeros((2, 100), np.float32))
    with pytest.raises(ValueError, match="NaN"):
        asr.transcribe(np.full(1000, np.nan, np.float32))


def test_missing_directory_and_files_are_named(tmp_path: Path, model_dir: Path) -> None:
    with pytest.raises(ModelFileMissing, match="asr_model_dir"):
        check_model_dir("")
    with pytest.raises(ModelFileMissing, match=r"directory not found: .*nowhere"):
        WhisperAsr(tmp_path / "nowhere")
    for missing, message in [
        ("model.safetensors", r"model weights file not found .* model\.safetensors"),
        ("tokenizer.json", r"tokenizer file not found .* tokenizer\.json or vocab\.json"),
        ("generation_config.json", r"generation_config\.json"),
    ]:
        d = tmp_path / f"without_{missing}"
        shutil.copytree(model_dir, d)
        (d / missing).unlink()
        with pytest.raises(ModelFileMissing, match=message):
            WhisperAsr(d)


def test_assembly_builds_whisper_with_threads(model_dir: Path) -> None:
    import torch

    from m3_perception.assembly import build_asr
    from m3_perception.perception_node import PARAMETERS

    p = {k: v[0] for k, v in PARAMETERS.items()}
    assert p["asr_language"] == "en" and p["asr_torch_threads"] == 0
    p["asr_language"] = ""  # detection, as logged below
    lines: list[str] = []

    class Log:
        def info(self, msg: str) -> None:
            lines.append(msg)

        def warning(self, msg: str) -> None:
            lines.append(msg)

    before = torch.get_num_threads()
    try:
        asr = build_asr({**p, "asr_backend": "whisper", "asr_model_dir": str(model_dir), "asr_torch_threads": 1}, Log())
        assert isinstance(asr, WhisperAsr) and torch.get_num_threads() == 1
        assert any("Whisper" in m and "torch CPU" in m and "detected per utterance" in m for m in lines)
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ModelFileMissing, match="asr_model_dir"):
        build_asr({**p, "asr_backend": "whisper"}, Log())
    with pytest.raises(ValueError, match="asr_backend"):
        build_asr({**p, "asr_backend": "vosk"}, Log())
