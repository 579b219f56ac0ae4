"""Bench part: the voice pipeline on conversations of real speakers (real_speech), scored with the
standard DER (metrics.der: collar 0.25 s, overlapped speech scored) per conversational variant.

Variants (each over the same seeds; "default" is the conversation `der_real` has always measured):
- default: five speakers, 16 back-to-back 1–3 s turns, gaps 0–0.3 s;
- zero_gap: the same turns with no gap at all;
- overlap: the same turns, 10 % of the speech time overlapped at turn changes (audio mixed);
- backchannel: the same turns with 6 short real words (0.3–0.8 s) of other speakers dropped in;
- telephone: the default stream through a 300–3400 Hz, 8 kHz µ-law channel;
- dialogue: two readers alternating (librivox, two_cities), gaps 0–0.3 s;
- call: that dialogue as a phone call: zero gap, 5 % overlap, 4 backchannels, telephone channel.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

BASE = {"short_share": 1.0, "back_to_back_share": 1.0}
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("five", {}),
    "zero_gap": ("five", {"zero_gap": True}),
    "overlap": ("five", {"overlap_share": 0.10}),
    "backchannel": ("five", {"backchannels": 6}),
    "telephone": ("five", {"telephone": True}),
    "dialogue": ("two", {}),
    "call": ("two", {"zero_gap": True, "overlap_share": 0.05, "backchannels": 4, "telephone": True}),
}


def pipeline_events(voices: Any, vad_model: str, samples: Any) -> tuple[list[tuple[float, float, str]], int]:
    """A fresh VoicePipeline with the bench pipeline's speaker encoder, segmentation model and
    VoiceParams (turn splitting and clustering as configured) and its own VAD, no ASR (text plays no
    part in DER), fed 0.1 s chunks. Returns its labelled events (start, end, voice_id), its revisions
    applied (voice_revision.final_voices), and its number of voices (merged ones not counted). Events
    with voice_id "" (a short turn near no known voice, or overlapped speech given to no voice) are left
    out: they count as missed speech."""
    from m3_perception.speech.vad import SileroVad
    from m3_perception.voices.pipeline import VoicePipeline
    from m3_perception.voices.revision import final_voices

    pipe = VoicePipeline(
        SileroVad(vad_model), voices.encoder, None, voices.p, activity_model=getattr(voices, "activity_model", None)
    )
    events, updates = [], []
    for i in range(0, len(samples), 1600):
        events += pipe.feed(samples[i : i + 1600], i / 16000)
        updates += pipe.take_updates()
    events += pipe.flush()
    updates += pipe.take_updates()
    standing = sum(not i.merged_into for i in pipe.clusters.identities.values())
    return final_voices(events, updates), standing


def score(reference: Sequence[tuple[float, float, str]], hypothesis: Sequence[tuple[float, float, str]]) -> dict:
    """The standard DER's parts, the collar-free DER (the figure `der_real` was before), voice ids per
    true speaker."""
    from m3_perception.material.metrics import der, voice_ids_per_speaker

    d, every_frame = der(reference, hypothesis), der(reference, hypothesis, collar=0.0)
    return {
        "der": d.der,
        "der_no_collar": every_frame.der,
        "speech_no_collar_s": every_frame.speech_s,
        "missed_s": d.missed_s,
        "false_alarm_s": d.false_alarm_s,
        "confusion_s": d.confusion_s,
        "speech_s": d.speech_s,
        "voice_ids_per_speaker": voice_ids_per_speaker(reference, hypothesis),
    }


def conversation_figures(voices: Any, vad_model: str, seeds: Sequence[int], variants: Sequence[str]) -> dict:
    """Per variant, over the seeds: `der` pooled as md-eval pools files (all errors / all scored speech),
    `der_no_collar` likewise, `voice_ids_per_speaker` and `voices` (ids founded) the mean per
    conversation, and each seed's figures."""
    from m3_perception.material.real_speech import assemble_conversation, conversation_sources, dialogue_sources
    from m3_perception.speech.vad import SileroVad

    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown conversation variants {unknown}; known: {', '.join(VARIANTS)}")
    sources = {"five": conversation_sources(), "two": dialogue_sources()}
    out = {}
    for name in variants:
        who, options = VARIANTS[name]
        runs, t0 = {}, time.perf_counter()
        for seed in seeds:
            conv = assemble_conversation(sources[who], SileroVad(vad_model), seed=seed, **BASE, **options)
            hyp, n_voices = pipeline_events(voices, vad_model, conv.samples)
            runs[seed] = {
                **score(conv.reference(), hyp),
                "speakers": len({t.speaker for t in conv.turns}),
                "turns": sum(not t.backchannel for t in conv.turns),
                "backchannels": sum(t.backchannel for t in conv.turns),
                "overlap_share": conv.overlap_share(),
                "stream_s": len(conv.samples) / 16000,
                "voices": n_voices,
            }
        out[name] = _pool(runs, time.perf_counter() - t0)
    return out


def _pool(runs: dict[int, dict], wall_s: float) -> dict:
    """One variant's seeds together: DERs pooled over the scored speech, the rest totals or means."""
    speech = sum(r["speech_s"] for r in runs.values())
    errors = sum(r["missed_s"] + r["false_alarm_s"] + r["confusion_s"] for r in runs.values())
    speech0 = sum(r["speech_no_collar_s"] for r in runs.values())
    errors0 = sum(r["der_no_collar"] * r["speech_no_collar_s"] for r in runs.values())
    n = len(runs)
    return {
        "der": round(errors / speech, 4) if speech else 0.0,
        "der_no_collar": round(errors0 / speech0, 4) if speech0 else 0.0,
        "voice_ids_per_speaker": round(sum(r["voice_ids_per_speaker"] for r in runs.values()) / n, 3),
        "voices": round(sum(r["voices"] for r in runs.values()) / n, 2),
        **{k: round(sum(r[k] for r in runs.values()), 2) for k in ("missed_s", "false_alarm_s", "confusion_s")},
        "speech_s": round(speech, 2),
        "wall_s": round(wall_s, 1),
        "seeds": {
            str(s): {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for s, r in runs.items()
        },
    }


def real_speech_keys(figures: dict) -> dict:
    """The bench's flat keys: `der_real*` as before (default conversation; with several seeds the
    seconds are totals and `der_real` the pooled DER), `der_real_no_collar` (the figure `der_real`
    was before the collar), one `der_real_<variant>` per other variant, and `voice_ids_per_speaker_real`."""
    keys: dict[str, Any] = {}
    if "default" in figures:
        d = figures["default"]
        first = next(iter(d["seeds"].values()))
        keys |= {
            "der_real": d["der"],
            "der_real_no_collar": d["der_no_collar"],
            "der_real_missed_s": d["missed_s"],
            "der_real_false_alarm_s": d["false_alarm_s"],
            "der_real_confusion_s": d["confusion_s"],
            "der_real_speech_s": d["speech_s"],
            "der_real_speakers": first["speakers"],
            "der_real_turns": sum(r["turns"] for r in d["seeds"].values()),
            "der_real_voices": d["voices"] if len(d["seeds"]) > 1 else first["voices"],
            "voice_ids_per_speaker_real": d["voice_ids_per_speaker"],
        }
    keys |= {f"der_real_{name}": f["der"] for name, f in figures.items() if name != "default"}
    return keys
