"""Render the demo episode offline: synthetic voices, real face photographs, a video with audio.

Everything comes from installed packages: photographs shipped with scikit-image and matplotlib,
voices from Debian's Festival and espeak-ng. The generator also writes the ground truth (who
speaks when, who is visible) and the questions in M3-Bench's annotation format. The script format
(line gaps, overlap, people only heard or off-camera, `named`) and the timeline are in timeline.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
import tempfile
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from m3_agent.demo.photos import crop_photo, load_photo, scale_to_height
from m3_agent.demo.places import write_place_files
from m3_agent.demo.things import draw_things, thing_images
from m3_agent.demo.timeline import (  # noqa: F401  (re-exported: the generator's public names)
    AUDIO_RATE_HZ,
    EpisodeTruth,
    Scene,
    Utterance,
    all_lines,
    plan_episode,
    validate,
)
from m3_agent.recording.video_writer import write_video
from m3_perception.material.synthetic import espeak_voice

CLIP_SECONDS = 30


def default_script() -> Path:
    return Path(str(resources.files("m3_agent.demo").joinpath("episode.yaml")))


def _require(command: str, package: str) -> str:
    path = shutil.which(command)
    if path is None:
        raise FileNotFoundError(f"{command} not found: install the Debian package {package}")
    return path


def synthesize(voice: str, text: str, cache_dir: Path) -> np.ndarray:
    """Speak `text` with 'festival:VOICE' or 'espeak:VOICE'; float32 mono at 16 kHz, cached."""
    import librosa
    import soundfile

    engine, _, name = voice.partition(":")
    if engine == "espeak":
        name = espeak_voice(name)  # the key too: audio rendered before a variant took effect is not reused
    key = hashlib.sha256(f"{engine}:{name}\n{text}".encode()).hexdigest()[:20]
    cached = cache_dir / f"{key}.npy"
    if cached.exists():
        return np.load(cached)
    with tempfile.TemporaryDirectory() as work:
        wav = Path(work) / "line.wav"
        if engine == "festival":
            text_file = Path(work) / "line.txt"
            text_file.write_text(text)
            command = [_require("text2wave", "festival"), "-eval", f"(voice_{name})", str(text_file), "-o", str(wav)]
        elif engine == "espeak":
            command = [_require("espeak-ng", "espeak-ng"), "-v", name, "-w", str(wav), text]
        else:
            raise ValueError(f"unknown voice {voice!r}: use festival:VOICE or espeak:VOICE")
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0 or not wav.exists() or wav.stat().st_size < 100:
            raise RuntimeError(f"speech synthesis failed for voice {voice!r}: {result.stderr.strip()}")
        samples, rate = soundfile.read(wav, dtype="float32", always_2d=True)
    mono = librosa.resample(samples.mean(axis=1), orig_sr=rate, target_sr=AUDIO_RATE_HZ)
    mono = (0.5 * mono / max(1e-6, float(np.abs(mono).max()))).astype(np.float32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(cached, mono)
    return mono


def render_frames(
    truth: EpisodeTruth,
    photos: dict[str, np.ndarray],
    fps: int,
    width: int,
    height: int,
    things: dict[str, np.ndarray] | None = None,
):
    """Yield RGB frames: the speaker large in the middle, the others present smaller beside, and the
    scene's things (demo/things.py; `things`: their images by thing_key) where they stand or in the hand
    of whoever holds them.

    Only people with a photo who are present are drawn: a speaker who is only heard, or who speaks
    from outside the scene (off-camera), leaves the frame to those present."""
    big = {p: scale_to_height(img, int(height * 0.62)) for p, img in photos.items()}
    small = {p: scale_to_height(img, int(height * 0.36)) for p, img in photos.items()}
    gradient = np.linspace(200, 120, height, dtype=np.float32)[:, None, None] * np.array([1.0, 0.95, 0.85])
    background = np.broadcast_to(gradient, (height, width, 3)).astype(np.uint8).copy()
    background[int(height * 0.8) :] = (110, 90, 70)  # the floor
    rng = np.random.default_rng(7)
    for index in range(math.ceil(truth.duration_s * fps)):
        t = index / fps
        frame = background.copy()
        scene = next((s for s in truth.scenes if s.start_s <= t < s.end_s), truth.scenes[-1])
        speaker = next((u.person for u in truth.utterances if u.start_s <= t < u.end_s), None)
        if speaker not in scene.present or speaker not in photos:
            speaker = None
        others = [p for p in scene.present if p != speaker]
        slots = np.linspace(0.2, 0.8, max(1, len(others))) if speaker is None else [0.13, 0.87][: len(others)]
        placed = [(p, small[p] if speaker else big[p], x) for p, x in zip(others, slots, strict=False)]
        if speaker is not None:
            placed.append((speaker, big[speaker], 0.5))
        if scene.things:
            draw_things(frame, scene.things, things or {}, {})
        portraits = {}
        for person, portrait, x_rel in placed:
            h, w = portrait.shape[:2]
            jitter = rng.integers(-3, 4, size=2)
            x0 = int(np.clip(x_rel * width - w / 2 + jitter[0], 0, width - w))
            y0 = int(np.clip(height * 0.78 - h + jitter[1], 0, height - h))
            frame[y0 : y0 + h, x0 : x0 + w] = portrait
            portraits[person] = (x0, y0, w, h)
        if scene.things:
            draw_things(frame, scene.things, things or {}, portraits)
        yield frame


def question_set(script: dict, truth: EpisodeTruth) -> dict:
    """The questions in M3-Bench robot.json format (timestamp "MM:SS", before_clip)."""
    lines = [(si, li) for si, li, _ in all_lines(script)]
    qa_list = []
    for number, item in enumerate(script["questions"], start=1):
        if item["at"] == "end":
            asked_s = math.ceil(truth.duration_s / CLIP_SECONDS) * CLIP_SECONDS
        else:
            scene_index, line_index = (int(x) for x in item["at"].removeprefix("after:").split("."))
            asked_s = math.ceil(truth.utterances[lines.index((scene_index, line_index))].end_s) + 1
            # Not before the first clip has closed: M3-Bench asks no robot question then, and its rule
            # would give before_clip -1, which the Instruct goal reads as no as-of limit at all (the
            # whole episode's memory, later clips included, for a question asked in the first clip).
            asked_s = max(asked_s, CLIP_SECONDS)
        qa_list.append(
            {
                "question": item["q"],
                "answer": item["a"],
                "question_id": f"{truth.episode_id}_Q{number:02d}",
                "reasoning": "",
                "timestamp": f"{int(asked_s // 60):02d}:{int(asked_s % 60):02d}",
                "type": list(item["type"]),
                "before_clip": int(asked_s // CLIP_SECONDS) - 1,
            }
        )
    return {truth.episode_id: {"video_path": "episode.mp4", "mem_path": "memory", "qa_list": qa_list}}


def generate(out_dir: str | Path, script_path: str | Path | None = None, cache_dir: str | Path | None = None) -> dict:
    """Write episode.mp4, truth.json and questions.json (and, for a script with places, regions.yaml and
    poses.json: demo/places.py) into out_dir; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = Path(script_path or default_script())
    script = yaml.safe_load(path.read_text())
    problems = validate(script)
    if problems:
        raise ValueError(f"episode script {path}: " + "; ".join(problems))
    cache = Path(cache_dir) if cache_dir else out_dir / ".voice_cache"
    voices: dict[str, list[np.ndarray]] = {person: [] for person in script["people"]}
    for _, _, line in all_lines(script):
        voices[line.person].append(synthesize(script["people"][line.person]["voice"], line.text, cache))
    truth, audio = plan_episode(script, voices)
    places = write_place_files(script, truth, out_dir)  # regions.yaml, poses.json: a script with places
    photos = {
        person: crop_photo(load_photo(spec["photo"]), spec.get("crop"))
        for person, spec in script["people"].items()
        if spec.get("photo")  # a person without a photo is only heard
    }
    things = thing_images(truth.scenes, script["width"], script["height"])
    frames = render_frames(truth, photos, script["fps"], script["width"], script["height"], things)
    video = write_video(out_dir / "episode.mp4", frames, script["fps"], audio, AUDIO_RATE_HZ)
    (out_dir / "truth.json").write_text(json.dumps(asdict(truth), indent=1))
    (out_dir / "questions.json").write_text(json.dumps(question_set(script, truth), indent=1))
    paths = {"video": str(video), "truth": str(out_dir / "truth.json"), "questions": str(out_dir / "questions.json")}
    return {**paths, **places}
