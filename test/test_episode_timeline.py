"""Episode scripts' conversation structure: line gaps, overlap, people only heard, old scripts unchanged,
and every scripted episode under m3_agent/demo/episodes loads and validates."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from m3_agent.demo.generate import render_frames
from m3_agent.demo.timeline import AUDIO_RATE_HZ, QUESTION_TYPES, all_lines, plan_episode, validate

DEMO = Path(__file__).resolve().parents[1] / "m3_agent" / "demo"
EPISODES = sorted((DEMO / "episodes").glob("*/*.yaml"))


def _original_plan(script: dict, voices: dict[str, list[np.ndarray]]) -> tuple[dict, np.ndarray]:
    """The generator's layout before line options existed (kept verbatim): the reference for old scripts."""
    gap_s = float(script.get("gap_s", 1.0))
    utterances, scenes, pieces = [], [], []
    taken = {person: 0 for person in script["people"]}
    t = 0.0

    def silence(seconds: float) -> None:
        nonlocal t
        pieces.append(np.zeros(round(seconds * AUDIO_RATE_HZ), np.float32))
        t += seconds

    for scene in script["scenes"]:
        start = t
        silence(float(scene.get("silent_s", 0.0)) + gap_s)
        for person, text in scene["lines"]:
            audio = voices[person][taken[person]]
            taken[person] += 1
            utterances.append((person, text, round(t, 3), round(t + len(audio) / AUDIO_RATE_HZ, 3)))
            pieces.append(audio)
            t += len(audio) / AUDIO_RATE_HZ
            silence(gap_s)
        scenes.append((list(scene["present"]), round(start, 3), round(t, 3)))
    return {"utterances": utterances, "scenes": scenes, "duration_s": round(t, 3)}, np.concatenate(pieces)


def _voices(script: dict, seed: int = 3) -> dict[str, list[np.ndarray]]:
    """Noise 'lines' of irregular lengths (0.3-4.1 s), one per scripted line, in script order."""
    rng = np.random.default_rng(seed)
    voices: dict[str, list[np.ndarray]] = {p: [] for p in script["people"]}
    for _, _, line in all_lines(script):
        voices[line.person].append((0.1 * rng.standard_normal(rng.integers(4800, 66000))).astype(np.float32))
    return voices


@pytest.mark.parametrize("name", ["episode.yaml", "episode_unseen.yaml"])
def test_old_scripts_lay_out_exactly_as_before(name):
    script = yaml.safe_load((DEMO / name).read_text())
    assert validate(script) == []
    voices = _voices(script)
    before, audio_before = _original_plan(script, {p: list(v) for p, v in voices.items()})
    truth, audio = plan_episode(script, voices)
    assert [(u.person, u.text, u.start_s, u.end_s) for u in truth.utterances] == before["utterances"]
    assert [(s.present, s.start_s, s.end_s) for s in truth.scenes] == before["scenes"]
    assert truth.duration_s == before["duration_s"]
    assert np.array_equal(audio, audio_before)


CONVERSATION = {
    "episode_id": "structure",
    "fps": 5,
    "width": 160,
    "height": 120,
    "gap_s": 1.0,
    "people": {
        "ana": {"name": "Ana", "named": True, "photo": "skimage:astronaut", "voice": "espeak:en-us"},
        "ravi": {"name": "Ravi", "named": True, "photo": "skimage:camera", "voice": "espeak:en-gb+f3"},
        "voice": {"name": "the caller", "named": False, "voice": "festival:kal_diphone"},  # heard only
    },
    "scenes": [
        {
            "present": ["ana", "ravi"],
            "lines": [
                ["ana", "one"],
                ["ravi", "two", {"gap": 0}],
                ["ana", "three", {"gap": -0.5}],
                ["voice", "four"],
            ],
        },
        {"present": ["ravi"], "silent_s": 20, "lines": [["ana", "five", {"gap": 0.2}], ["ravi", "six"]]},
    ],
    "questions": [{"q": "Who spoke last?", "a": "Ravi", "type": ["Person Understanding"], "at": "after:1.1"}],
}


def _tone(seconds: float, freq: float) -> np.ndarray:
    t = np.arange(round(seconds * AUDIO_RATE_HZ)) / AUDIO_RATE_HZ
    return (0.4 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_gaps_overlap_and_long_absence_give_the_right_truth():
    voices = {
        "ana": [_tone(2.0, 200), _tone(1.0, 300), _tone(1.5, 500)],
        "ravi": [_tone(1.5, 400), _tone(1.0, 600)],
        "voice": [_tone(1.0, 700)],
    }
    truth, audio = plan_episode(CONVERSATION, voices)
    u = truth.utterances
    assert (u[0].start_s, u[0].end_s) == (1.0, 3.0)
    assert (u[1].start_s, u[1].end_s) == (3.0, 4.5)  # back to back: starts where the last ended
    assert (u[2].start_s, u[2].end_s) == (4.0, 5.0)  # 0.5 s over Ravi's end
    assert u[3].start_s == 6.0  # the default gap after the later end
    scene2 = truth.scenes[1]
    assert scene2.start_s == 8.0 and u[4].start_s == pytest.approx(28.2)  # 20 s absent, then its own 0.2 s gap
    assert truth.duration_s == pytest.approx(u[5].end_s + 1.0)
    assert len(audio) == round(truth.duration_s * AUDIO_RATE_HZ)
    # the overlap is mixed: both tones are in 4.0-4.5 s, only Ana's after it
    both = audio[round(4.1 * AUDIO_RATE_HZ) : round(4.4 * AUDIO_RATE_HZ)]
    spectrum = np.abs(np.fft.rfft(both))
    freqs = np.fft.rfftfreq(len(both), 1 / AUDIO_RATE_HZ)
    assert spectrum[np.argmin(abs(freqs - 400))] > 0.2 * spectrum.max()
    assert spectrum[np.argmin(abs(freqs - 300))] > 0.2 * spectrum.max()
    assert validate(CONVERSATION) == []


def test_people_only_heard_or_off_camera_are_never_drawn():
    voices = {
        "ana": [_tone(2.0, 200), _tone(1.0, 300), _tone(1.5, 500)],
        "ravi": [_tone(1.5, 400), _tone(1.0, 600)],
        "voice": [_tone(1.0, 700)],
    }
    truth, _ = plan_episode(CONVERSATION, voices)
    red, blue = np.zeros((60, 40, 3), np.uint8), np.zeros((60, 40, 3), np.uint8)
    red[..., 0], blue[..., 2] = 255, 255
    frames = list(render_frames(truth, {"ana": red, "ravi": blue}, 5, 160, 120))

    def area(frame: np.ndarray, channel: int) -> int:
        others = [c for c in range(3) if c != channel]
        return int(((frame[..., channel] == 255) & (frame[..., others] == 0).all(axis=-1)).sum())

    heard = frames[round(6.5 * 5)]  # the heard-only voice speaks: both present are drawn large, nobody else
    assert area(heard, 0) > 0 and area(heard, 2) > 0
    off_camera = frames[round(28.6 * 5)]  # Ana speaks from outside the scene: only Ravi is drawn, large
    assert area(off_camera, 0) == 0 and area(off_camera, 2) == area(heard, 2)
    speaking = frames[round(2.0 * 5)]  # Ana speaks on camera: large, Ravi small
    assert area(speaking, 0) > area(speaking, 2) > 0


def test_validation_names_what_is_wrong():
    bad = yaml.safe_load(yaml.safe_dump(CONVERSATION))
    bad["scenes"][0]["lines"].append(["nobody", "hello"])
    bad["scenes"][1]["present"].append("voice")
    bad["scenes"][1]["lines"][0][2] = {"gap": -1}
    bad["questions"].append({"q": "Q?", "a": "A", "type": ["Vibes"], "at": "after:9.9"})
    problems = " | ".join(validate(bad))
    for expected in ("'nobody' is not in people", "'voice' has no photo", "cannot overlap", "'Vibes'", "after:9.9"):
        assert expected in problems
    odd = validate({**CONVERSATION, "scenes": [{"present": [], "lines": [["ana", "x", {"pause": 1}]]}]})
    assert any("unknown line option(s) ['pause']" in problem for problem in odd)


def test_there_are_at_least_eight_episodes_and_three_held_out():
    splits = {path.parent.name for path in EPISODES}
    assert splits == {"dev", "test"}
    assert len(EPISODES) >= 8 and sum(p.parent.name == "test" for p in EPISODES) >= 3


@pytest.mark.parametrize("path", EPISODES, ids=[f"{p.parent.name}/{p.stem}" for p in EPISODES])
def test_every_episode_script_validates(path):
    script = yaml.safe_load(path.read_text())
    assert validate(script) == []
    assert 3 <= len(script["people"]) <= 5
    assert all(isinstance(spec.get("named"), bool) for spec in script["people"].values())
    questions = script["questions"]
    assert 12 <= len(questions) <= 20
    assert sum("Person Understanding" in q["type"] for q in questions) * 3 >= len(questions)
    assert {t for q in questions for t in q["type"]} <= set(QUESTION_TYPES)
    unnamed = {spec["name"] for spec in script["people"].values() if not spec["named"]}
    said = " ".join(line.text for _, _, line in all_lines(script))
    assert not any(name in said for name in unnamed)  # an unnamed person's (invented) name is never said
    speakers = [synthetic_speaker(spec["voice"]) for spec in script["people"].values()]
    assert len(set(speakers)) == len(speakers), f"two people speak as one synthetic speaker: {speakers}"


def synthetic_speaker(voice: str) -> str:
    """Which synthetic speaker a voice is to a speaker model (episodes README, Voices): espeak's accents
    without a female variant ("en-029", "en-us+m3") are one male voice (CAM++ cosine 0.67-0.77 apart,
    as within one voice); a female variant and each Festival voice are their own."""
    engine, _, name = voice.partition(":")
    if engine != "espeak":
        return voice
    variant = name.partition("+")[2]
    return f"espeak+{variant}" if variant.startswith("f") else "espeak, male"


def test_an_episode_judge_takes_the_spellings_its_truth_file_lists(tmp_path: Path):
    """The benchmarks and `m3 demo` judge with the truth file's people: a listed spelling is right, an
    unlisted one, or another person, is not."""
    import json

    from m3_agent.demo.timeline import episode_judge

    truth = tmp_path / "truth.json"
    people = {"ilse": {"name": "Ilse", "spellings": ["Ilsa"]}, "bo": {"name": "Bo"}}
    truth.write_text(json.dumps({"people": people}))
    judged, method = episode_judge(truth)
    assert method == "normalised-match"
    assert judged("Who waters the plants?", "Ilse", "Ilsa waters them.")
    assert judged("Who waters the plants?", "Ilse", "Ilsa waters them.")  # the second time from the cache
    assert not judged("Who waters the plants?", "Ilse", "Elsa waters them.")
    assert not judged("Who waters the plants?", "Ilse", "Bo waters them.")


def _median_f0_hz(samples: np.ndarray) -> float:
    import librosa

    f0, voiced, _ = librosa.pyin(samples, fmin=60, fmax=450, sr=AUDIO_RATE_HZ)
    return float(np.median(f0[voiced]))


def test_an_espeak_variant_is_spoken_after_every_language_name(tmp_path):
    """espeak-ng drops "+f3" after "en-gb" (the episodes' female en-gb people spoke as the male voice
    every other plain espeak person has); the generator speaks each variant the scripts name."""
    from m3_agent.demo.generate import synthesize

    line = "Good morning, the delivery arrived at the back door."
    plain = _median_f0_hz(synthesize("espeak:en-gb", line, tmp_path))
    assert plain < 130
    for voice in ["espeak:en-gb+f3", "espeak:en-us+f3", "espeak:en-gb-scotland+f4"]:
        assert _median_f0_hz(synthesize(voice, line, tmp_path)) > 1.5 * plain, voice
    assert len(list(tmp_path.glob("*.npy"))) == 4  # each voice its own cached audio
