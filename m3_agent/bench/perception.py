"""Benchmark: a synthetic episode (real face photos, synthesised voices) through the pipelines.

    python -m m3_agent.bench.perception --duration 60 --fps 5

Prints progress to stderr and, as the last stdout line, one JSON object with the realtime factor
(episode seconds / wall seconds of the node's PerceptionEngine: faces and voices on their worker
threads, speech-to-text in its child process), per-stage milliseconds, face/voice pairwise F1, and
the ASR word error rate on the Festival HTS voice (`asr_wer`; all voices: `asr_wer_all`).

Real speech (real_speech.py; `asr_wer_real`, `der_real`): the configured ASR's word error rate over
pocketsphinx-testdata's LibriVox clips, and the standard diarization error rate (collar 0.25 s,
overlap scored) on conversations assembled from real recordings: five speakers (LibriVox reader,
two_cities, the pocketsphinx raw recordings' reader, clone-test, cards) with back-to-back 1–3 s
turns (`der_real`, as always), and
the conversational variants of bench_conversations (zero gap, overlap, backchannels, telephone,
a two-person dialogue and call: `der_real_<variant>`, details in `conversations`), over `--seeds`.
Every WER compares `metrics.normalize_text` of both sides.

Seeing (seeing.py; `objects`, `ocr`): the embedded detector and text reader on real photos; and
`with_seeing`: the episode again with objects and text on beside faces and voices, its realtime factor
and how many of the frames seeing wanted it processed (everything_on).

    python -m m3_agent.bench.perception --conversations-only --seeds 1,2,3   # the conversations alone
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from m3_agent.bench.conversations import VARIANTS, conversation_figures, real_speech_keys

PEOPLE = ["astronaut", "hopper", "cameraman"]
VOICE_OF = {"astronaut": "slt", "hopper": "kal", "cameraman": "espeak:en-us"}
HTS_VOICE = "slt"  # Festival's cmu_us_slt_arctic_hts
LINES = [
    "the red folder is on the kitchen table",
    "my name is bob and i like green tea",
    "alice put the keys in the drawer this morning",
    "please bring me the blue cup from the office",
    "the meeting starts at three in the afternoon",
    "i left my phone next to the coffee machine",
    "we need more milk and some bread",
    "the printer in the hall is broken again",
]
# Two non-overlapping places on a 640x480 canvas, and a per-person scale giving faces of 70–150 px.
SLOTS = [(20, 60), (350, 90)]
SCALE = {"astronaut": 1.1, "hopper": 0.8, "cameraman": 1.3}


def build_episode(duration: float, fps: float, seed: int) -> tuple[list, np.ndarray, list]:
    """Frames (stamp, rgb, [(person, rect)]), 16 kHz audio, utterances (person, line, start)."""
    from m3_perception.material.synthetic import compose, face_photos, speak

    rng = np.random.default_rng(seed)
    photos = face_photos()
    scene_s = 5.0
    n_scenes = max(1, int(np.ceil(duration / scene_s)))
    audio = np.zeros(int((n_scenes * scene_s + 1.0) * 16000), np.float32)
    frames, utterances = [], []
    cache: dict[tuple[str, str], np.ndarray] = {}
    for k in range(n_scenes):
        present = list(rng.choice(PEOPLE, size=int(rng.integers(1, 3)), replace=False))
        slots = rng.permutation(len(SLOTS))[: len(present)]
        placements = []
        rects = []
        for person, s in zip(present, slots, strict=True):
            x, y = SLOTS[s]
            scale = SCALE[person]
            x += int(rng.integers(-10, 10))
            placements.append((person, x, y, scale))
            ph = photos[person]
            rects.append((person, (x, y, ph.shape[1] * scale, ph.shape[0] * scale)))
        img = compose(photos, placements)
        t = k * scene_s
        while t < (k + 1) * scene_s - 1e-9:
            frames.append((t, img, rects))
            t += 1.0 / fps
        speaker = present[0]
        line = LINES[int(rng.integers(len(LINES)))]
        key = (speaker, line)
        if key not in cache:
            cache[key] = speak(line, VOICE_OF[speaker])
        x = cache[key][: int((scene_s - 1.0) * 16000)]
        a = int((k * scene_s + 0.5) * 16000)
        audio[a : a + len(x)] = x
        utterances.append((speaker, line, k * scene_s + 0.5))
    return frames, audio, utterances


def _label(box: tuple[float, float, float, float], rects: list) -> str | None:
    cx, cy = box[0] + box[2] / 2, box[1] + box[3] / 2
    for person, (x, y, w, h) in reversed(rects):  # later photos are pasted on top
        if x <= cx <= x + w and y <= cy <= y + h:
            return person
    return None


def run_engine(
    faces, voices, frames: list, audio: np.ndarray, seeing=None
) -> tuple[float, list, list, dict, int | None]:
    """Run the node's PerceptionEngine (faces and voices on their own worker threads, as in the node)
    losslessly: each frame is handed over once the face worker took the previous one, the audio all at
    once (no backlog limit). Returns (wall seconds until idle, [(stamp, faces)] per frame, voice events,
    each worker's busy seconds, the ASR's windowed transcripts decoded again: read before the engine
    closes its child process, None when it keeps no count). seeing: a SeeingWorker
    given the same frames as the node gives it (its stream-time rate, one frame slot): it competes for
    the cores, and drops what it cannot keep up with."""
    from m3_perception.engine import EngineCallbacks, PerceptionEngine
    from m3_perception.face_voice_matcher import FaceVoiceMatcher

    face_results: list = []
    events: list = []
    errors: list = []
    callbacks = EngineCallbacks(
        on_faces=lambda stamp, _w, _h, obs: face_results.append((stamp, obs)),
        on_voice=events.append,
        on_match=lambda _c: None,
        on_identities=lambda _k, _s, _i: None,
        on_error=lambda what, e: errors.append(f"{what}: {e!r}"),
    )
    engine = PerceptionEngine(
        faces, voices, FaceVoiceMatcher(), callbacks, face_rate_hz=0.0, max_audio_backlog_s=len(audio) / 16000 + 60
    )
    try:
        t0 = time.perf_counter()
        for i in range(0, len(audio), 1600):
            engine.submit_audio(i / 16000, audio[i : i + 1600])
        engine.flush_voices()
        for stamp, img, _ in frames:
            while engine.frame_pending():
                time.sleep(0.0005)
            engine.submit_frame(stamp, img)
            if seeing is not None and seeing.frame_wanted(stamp):
                seeing.submit(stamp, img)
        while not engine.idle():
            time.sleep(0.001)
        wall = time.perf_counter() - t0
        redecoded = getattr(voices.asr, "redecoded", None)
    finally:
        engine.close()
    if errors:
        raise RuntimeError("perception failed during the bench: " + "; ".join(errors[:3]))
    busy = {"faces": sum(engine.stats.face_ms) / 1000, "voices": sum(engine.stats.voice_ms) / 1000}
    return wall, face_results, events, busy, redecoded


def everything_on(params: dict, frames: list, audio: np.ndarray) -> dict:
    """The realtime factor with seeing on beside faces and voices (fresh pipelines, the node's other
    settings), and how much of what seeing wanted it processed (the rest it dropped, as the node does)."""
    from m3_perception.assembly import build_pipelines, build_seeing
    from m3_perception.seeing import SeeingWorker

    on = dict(params)
    on["object_backend"] = params["object_backend"] if params["object_backend"] != "none" else "yolov3_tiny"
    on["text_backend"] = params["text_backend"] if params["text_backend"] != "none" else "rapidocr"
    faces, voices, _ = build_pipelines(on)
    errors: list[str] = []
    worker = SeeingWorker(build_seeing(on), lambda _seen: None, lambda what, e: errors.append(f"{what}: {e!r}"))
    try:
        started = time.perf_counter()
        wall, *_ = run_engine(faces, voices, frames, audio, seeing=worker)
        while not worker.idle():
            time.sleep(0.01)
        seeing_wall = time.perf_counter() - started
    finally:
        worker.close()
    if errors:
        raise RuntimeError("seeing failed during the bench: " + "; ".join(errors[:3]))
    stats = worker.stats
    wanted = stats.frames_processed + stats.frames_dropped
    return {
        "realtime_factor": round(len(audio) / 16000 / wall, 3),  # faces and voices, seeing competing
        "object_backend": on["object_backend"],
        "text_backend": on["text_backend"],
        "frames_wanted": wanted,  # frames at object_rate_hz of stream time
        "frames_processed": stats.frames_processed,
        "frames_dropped": stats.frames_dropped,  # replaced while the worker was busy
        # frames seeing got through per wall second, against the object_rate_hz it is asked for in stream
        # time: below it, seeing would drop frames even on a stream played at 1x
        "processed_per_wall_s": round(stats.frames_processed / seeing_wall, 2),
        "rate_hz": on["object_rate_hz"],
        "text_keyframes": stats.text_keyframes,
        "object_ms_p50": round(float(np.median(stats.object_ms)), 1) if stats.object_ms else None,
        "text_ms_p50": round(float(np.median(stats.text_ms)), 1) if stats.text_ms else None,
    }


def real_asr_wer(asr) -> float | None:
    """Word-weighted WER of `asr` over the LibriVox clips (None when no ASR is configured)."""
    from m3_perception.material.metrics import normalize_text, wer
    from m3_perception.material.real_speech import librivox_clips

    if asr is None:
        return None
    pairs = [(normalize_text(c.text or ""), normalize_text(asr.transcribe(c.samples).text)) for c in librivox_clips()]
    words = sum(len(r.split()) for r, _ in pairs)
    return round(sum(wer(r, h) * len(r.split()) for r, h in pairs) / words, 4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="m3_agent.bench.perception", description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=60.0, help="episode length [s of stream time]")
    ap.add_argument("--fps", type=float, default=5.0, help="camera frames per second given to face processing")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--seeds",
        default="",
        metavar="N,N,...",
        help="seeds of the real-speech conversations (default: --seed); DER pooled over them",
    )
    ap.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        metavar="NAME,...",
        help=f"conversation variants to score (default all: {', '.join(VARIANTS)})",
    )
    ap.add_argument(
        "--conversations-only",
        action="store_true",
        help="only the real-speech conversations (no synthetic episode, no ASR): their keys and `conversations`",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="perception_node parameter for this run (YAML value; repeatable), e.g. --set asr_subprocess=false",
    )
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()] or [args.seed]
    except ValueError:
        ap.error(f"--seeds wants comma-separated integers, got {args.seeds!r}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := sorted(set(variants) - set(VARIANTS)):
        ap.error(f"unknown --variants {unknown}; known: {', '.join(VARIANTS)}")

    import yaml

    from m3_agent.bench.seeing import seeing_figures
    from m3_perception.assembly import build_pipelines
    from m3_perception.material.metrics import normalize_text, pairwise_f1, wer
    from m3_perception.perception_node import PARAMETERS

    params = {name: default for name, (default, _) in PARAMETERS.items()}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or name not in params:
            ap.error(f"--set wants NAME=VALUE with a perception_node parameter name, got {item!r}")
        params[name] = yaml.safe_load(value)

    if args.conversations_only:
        params["asr_backend"] = "none"  # text plays no part in DER
    t_load = time.perf_counter()
    faces, voices, _ = build_pipelines(params)  # the node's defaults: what `m3 run` processes with
    load_s = time.perf_counter() - t_load
    print(
        f"real speech: ASR over the LibriVox clips, DER of conversations ({', '.join(variants)}; seeds {seeds}) ...",
        file=sys.stderr,
    )
    t_real = time.perf_counter()
    conversations = conversation_figures(voices, params["vad_model"], seeds, variants)
    real = {"asr_wer_real": real_asr_wer(voices.asr), **real_speech_keys(conversations)}
    real["real_speech_wall_s"] = round(time.perf_counter() - t_real, 2)
    if args.conversations_only:
        print(json.dumps({**real, "seeds": seeds, "conversations": conversations}))
        return 0
    print("synthesising the episode ...", file=sys.stderr)
    frames, audio, utterances = build_episode(args.duration, args.fps, args.seed)
    print(
        f"models loaded in {load_s:.1f} s; processing {len(frames)} frames, {len(audio) / 16000:.0f} s audio "
        "(faces and voices on the engine's two worker threads, as in the node)",
        file=sys.stderr,
    )

    wall, face_results, events, busy, redecoded = run_engine(faces, voices, frames, audio)
    print("seeing: objects and notes on real photos ...", file=sys.stderr)
    seeing = seeing_figures(params)
    print("the episode again with objects and text on ...", file=sys.stderr)
    seeing["with_seeing"] = everything_on(params, frames, audio)
    face_truth, face_pred, missed, false_pos, pending = [], [], 0, 0, 0
    for (stamp, _, rects), (done_stamp, obs) in zip(frames, face_results, strict=True):
        assert done_stamp == stamp, "frames must come back in order, none dropped"
        found = set()
        for o in obs:
            person = _label(o.box, rects)
            if person is None:
                false_pos += 1
                continue
            found.add(person)
            if not o.face_id:
                pending += 1  # a new face whose identity is not confirmed yet: no id, not in the F1
                continue
            face_truth.append(person)
            face_pred.append(o.face_id)
        missed += len({p for p, _ in rects} - found)

    voice_truth, voice_pred, refs, hyps = [], [], [], []
    for ev in events:
        mid = (ev.start + ev.end) / 2
        match = [u for u in utterances if u[2] - 0.5 <= mid <= u[2] + 4.5]
        if not match:
            continue
        person, line, _ = match[0]
        voice_truth.append(VOICE_OF[person])
        voice_pred.append(ev.voice_id)
        refs.append(line)
        hyps.append(ev.transcript.text)

    def corpus_wer(voice: str | None) -> float | None:
        """Word error rate over the utterances of one voice (None: all), weighted by reference words."""
        pairs = [(r, h) for r, h, v in zip(refs, hyps, voice_truth, strict=True) if voice in (None, v)]
        words = sum(len(r.split()) for r, _ in pairs)
        pairs = [(normalize_text(r), normalize_text(h)) for r, h in pairs]
        words = sum(len(r.split()) for r, _ in pairs)
        return round(sum(wer(r, h) * len(r.split()) for r, h in pairs) / words, 4) if words else None

    stream_s = len(audio) / 16000
    stages = {**faces.timings_ms, **voices.timings_ms}
    result = {
        "stream_s": round(stream_s, 2),
        "frames": len(frames),
        "utterances_true": len(utterances),
        "utterances_found": len(events),
        "realtime_factor": round(stream_s / wall, 3),  # episode seconds per processing second: higher is faster
        "wall_s": round(wall, 2),
        "worker_busy_s": {k: round(v, 2) for k, v in busy.items()},  # the two threads overlap: sum > wall
        "model_load_s": round(load_s, 2),
        "stage_ms_total": {k: round(v, 1) for k, v in stages.items()},
        "stage_ms_per_frame": {k: round(v / len(frames), 2) for k, v in faces.timings_ms.items()},
        "stage_ms_per_utterance": {k: round(v / max(1, len(events)), 2) for k, v in voices.timings_ms.items()},
        "face_pairwise_f1": round(pairwise_f1(face_truth, face_pred), 4),
        "face_ids": len(faces.clusters.identities),
        "faces_missed": missed,
        "faces_pending": pending,
        "faces_false_positive": false_pos,
        "voice_pairwise_f1": round(pairwise_f1(voice_truth, voice_pred), 4),
        "voice_ids": len(voices.clusters.identities),
        "asr_wer": corpus_wer(HTS_VOICE),  # the figure: the Festival HTS voice (None if it never spoke)
        "asr_wer_all": corpus_wer(None),
        "asr_wer_by_voice": {v: corpus_wer(v) for v in sorted(set(voice_truth))},
        # windowed transcripts that slipped (repeated themselves, stopped early), decoded again at 30 s
        "asr_redecoded": redecoded,
        **real,
        **seeing,  # objects: precision/recall on labelled package photos; ocr: CER of notes pasted on photos
        "conversations": conversations,  # per variant: der, der_no_collar, voice_ids_per_speaker, ... per seed
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
