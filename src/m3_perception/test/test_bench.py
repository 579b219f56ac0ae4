"""The bench command end to end on a short episode: JSON as the last stdout line, sane figures."""

import json

from m3_perception.bench import main


def test_bench_prints_json_figures(capsys) -> None:
    assert main(["--duration", "10", "--fps", "2", "--seed", "3"]) == 0
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
    assert set(fig["stage_ms_total"]) == {"face_detect", "face_embed", "vad", "turns", "speaker", "asr"}
    # real speech: the configured ASR on LibriVox, DER of a real five-speaker conversation
    assert 0.0 <= fig["asr_wer_real"] <= 0.05
    assert fig["der_real_speakers"] >= 3 and fig["der_real_voices"] >= 1 and 0.0 <= fig["der_real"] <= 1.0
    parts = fig["der_real_missed_s"] + fig["der_real_false_alarm_s"] + fig["der_real_confusion_s"]
    assert abs(parts / fig["der_real_speech_s"] - fig["der_real"]) < 0.01
