"""The bench command end to end on a short episode: JSON as the last stdout line, sane figures."""

import json

import pytest

from m3_agent.bench.conversations import _pool, real_speech_keys, score
from m3_agent.bench.perception import main


def test_bench_prints_json_figures(capsys) -> None:
    assert main(["--duration", "10", "--fps", "2", "--seed", "3", "--variants", "default,overlap,call"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    fig = json.loads(out[-1])
    for key in ("realtime_factor", "stage_ms_total", "face_pairwise_f1", "voice_pairwise_f1", "asr_wer"):
        assert key in fig
    assert fig["utterances_found"] == fig["utterances_true"] == 2
    assert fig["face_pairwise_f1"] == 1.0 and fig["faces_missed"] == 0
    # Only a new person's first frame waits for a second, agreeing embedding before it gets an id.
    assert 0 < fig["faces_pending"] <= fig["face_ids"]
    assert 0.0 <= fig["asr_wer_all"] <= 1.0 and fig["realtime_factor"] > 0
    assert fig["asr_wer"] == fig["asr_wer_by_voice"].get("slt")  # the HTS voice's figure (None if it never spoke)
    # the default ASR (faster-whisper, 10 s window, in a child process) counts its re-decoded transcripts
    assert isinstance(fig["asr_redecoded"], int) and 0 <= fig["asr_redecoded"] <= fig["utterances_found"]
    stages = {"face_detect", "face_embed", "vad", "turns", "speaker", "asr"}
    assert stages <= set(fig["stage_ms_total"]) <= stages | {"segmentation", "revision"}  # models used, if any
    # real speech: the configured ASR on LibriVox, DER of a real five-speaker conversation
    assert 0.0 <= fig["asr_wer_real"] <= 0.05
    assert fig["der_real_speakers"] >= 3 and fig["der_real_voices"] >= 1 and 0.0 <= fig["der_real"] <= 1.0
    parts = fig["der_real_missed_s"] + fig["der_real_false_alarm_s"] + fig["der_real_confusion_s"]
    assert abs(parts / fig["der_real_speech_s"] - fig["der_real"]) < 0.01
    assert 0.0 <= fig["der_real_no_collar"] <= 1.0 and fig["voice_ids_per_speaker_real"] >= 0.0
    # the conversational variants asked for: flat DER keys, details per seed
    assert set(fig["conversations"]) == {"default", "overlap", "call"}
    assert fig["der_real_overlap"] == fig["conversations"]["overlap"]["der"] and 0.0 <= fig["der_real_call"] <= 1.0
    overlap = fig["conversations"]["overlap"]["seeds"]["3"]
    assert overlap["overlap_share"] == pytest.approx(0.1, abs=0.005) and overlap["speakers"] == 5
    # seeing: the embedded detector on the labelled photos, the text reader on the pasted notes
    assert fig["objects"]["tp"] >= 4 and 0.0 < fig["objects"]["precision"] <= 1.0 and fig["objects"]["recall"] > 0.5
    assert fig["ocr"]["cer_max"] <= 0.05 and len(fig["ocr"]["notes"]) == 7
    # the episode again with objects and text on: the realtime factor, and what seeing got through
    on = fig["with_seeing"]
    assert on["object_backend"] == "yolov3_tiny" and on["text_backend"] == "rapidocr" and on["realtime_factor"] > 0
    assert on["frames_processed"] >= 1 and on["frames_processed"] + on["frames_dropped"] == on["frames_wanted"]
    assert on["text_keyframes"] >= 1 and on["object_ms_p50"] > 0 and on["processed_per_wall_s"] > 0
    call = fig["conversations"]["call"]["seeds"]["3"]
    assert call["speakers"] == 2 and call["backchannels"] == 4 and call["overlap_share"] > 0.05


def test_bench_rejects_unknown_variants_and_seeds() -> None:
    with pytest.raises(SystemExit):
        main(["--variants", "default,radio"])
    with pytest.raises(SystemExit):
        main(["--seeds", "1,x"])


def test_variant_figures_pool_over_seeds() -> None:
    """Seeds pool as md-eval pools files: all error seconds over all scored speech (collar 0.25 s)."""
    ref = [(0.0, 2.0, "A"), (2.0, 4.0, "B")]
    one = {**score(ref, [(0.0, 2.0, "x"), (2.0, 4.0, "y")]), "speakers": 2, "turns": 2, "voices": 2}
    two = {**score(ref, [(0.0, 4.0, "x")]), "speakers": 2, "turns": 2, "voices": 1}  # B's scored 1.5 s confused
    assert one["der"] == 0.0 and two["der"] == pytest.approx(0.5) and two["der_no_collar"] == pytest.approx(0.5)
    assert two["voice_ids_per_speaker"] == 1.0  # one id each (the same one: a merge shows as confusion)
    pooled = _pool({1: one, 2: two}, 1.0)
    assert pooled["der"] == pytest.approx(1.5 / 6.0) and pooled["speech_s"] == pytest.approx(6.0)
    assert pooled["voices"] == 1.5 and set(pooled["seeds"]) == {"1", "2"}
    keys = real_speech_keys({"default": pooled, "call": pooled})
    assert keys["der_real"] == keys["der_real_call"] == pooled["der"] and keys["der_real_turns"] == 4
