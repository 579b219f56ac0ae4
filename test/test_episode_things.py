"""Things in scripted scenes (issue 23, part 6): validation names what is wrong, a thing stands where the
script puts it, a held thing moves with its holder, a rendered note is read back by the embedded OCR, and
a rendered episode with things is replayed with seeing on."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from m3_agent.demo.generate import render_frames
from m3_agent.demo.things import SEEING, render_note, seeing_parameters, thing_images, thing_key, validate_things
from m3_agent.demo.timeline import plan_episode, validate

DEMO = Path(__file__).resolve().parents[1] / "m3_agent" / "demo"
GREEN = {"thing": "box", "photo": "skimage:astronaut", "crop": [0, 0, 10, 10], "at": [0.8, 0.95], "height": 0.2}
HELD = {"thing": "cup", "photo": "skimage:astronaut", "crop": [0, 0, 12, 12], "held_by": "ana", "height": 0.2}
SCRIPT = {
    "episode_id": "things", "fps": 5, "width": 160, "height": 120, "gap_s": 0.5,
    "people": {
        "ana": {"name": "Ana", "photo": "skimage:astronaut", "voice": "espeak:en-us"},
        "ravi": {"name": "Ravi", "photo": "skimage:camera", "voice": "espeak:en-gb"},
    },
    "scenes": [
        {"present": ["ana", "ravi"], "things": [GREEN, HELD], "lines": [["ana", "one"], ["ravi", "two"]]},
        {"present": ["ana"], "lines": [["ana", "three"]]},
    ],
    "questions": [{"q": "What was Ana holding?", "a": "cup", "type": ["Cross-Modal Reasoning"], "at": "end"}],
}  # fmt: skip


def _tone(seconds: float) -> np.ndarray:
    return (0.3 * np.sin(np.arange(int(seconds * 16000)) / 10)).astype(np.float32)


def _coloured(truth) -> dict[str, np.ndarray]:
    """Flat colours in place of the photos, so each can be found in a frame."""
    images = thing_images(truth.scenes, 160, 120)
    for key, colour in ((thing_key(GREEN), (0, 255, 0)), (thing_key(HELD), (255, 0, 255))):
        images[key] = np.full_like(images[key], colour)
    return images


def _where(frame: np.ndarray, colour: tuple[int, int, int]) -> tuple[float, float] | None:
    ys, xs = np.nonzero((frame == colour).all(axis=-1))
    return (float(xs.mean()), float(ys.mean())) if len(xs) else None


def test_things_stand_where_the_script_puts_them_and_held_ones_move_with_the_holder():
    assert validate(SCRIPT) == []
    truth, _ = plan_episode(SCRIPT, {"ana": [_tone(1.0), _tone(1.0)], "ravi": [_tone(1.0)]})
    red, blue = np.zeros((60, 40, 3), np.uint8), np.zeros((60, 40, 3), np.uint8)
    red[..., 0], blue[..., 2] = 255, 255
    frames = list(render_frames(truth, {"ana": red, "ravi": blue}, 5, 160, 120, _coloured(truth)))
    ana_speaks = frames[round((truth.utterances[0].start_s + 0.5) * 5)]
    ravi_speaks = frames[round((truth.utterances[1].start_s + 0.5) * 5)]
    box = _where(ana_speaks, (0, 255, 0))
    assert box is not None and abs(box[0] - 0.8 * 160) < 3 and abs(box[1] - (0.95 * 120 - 12)) < 3
    held_big, held_small = _where(ana_speaks, (255, 0, 255)), _where(ravi_speaks, (255, 0, 255))
    ana_big, ana_small = _where(ana_speaks, (255, 0, 0)), _where(ravi_speaks, (255, 0, 0))
    assert held_big and held_small and ana_big and ana_small
    assert abs(held_big[0] - ana_big[0]) < 20 and abs(held_small[0] - ana_small[0]) < 20  # with Ana, wherever
    assert abs(held_big[0] - held_small[0]) > 30  # she is drawn: in the middle, then to the side
    later = frames[round((truth.utterances[2].start_s + 0.5) * 5)]  # the next scene has no things
    assert _where(later, (0, 255, 0)) is None and _where(later, (255, 0, 255)) is None


def test_validation_names_what_is_wrong_with_a_thing():
    bad = yaml.safe_load(yaml.safe_dump(SCRIPT))
    bad["scenes"][0]["things"] = [
        {"photo": "skimage:coffee", "at": [0.5, 0.5]},
        {"thing": "cup", "photo": "skimage:coffee", "text": "both", "at": [0.5, 0.5]},
        {"thing": "cup", "photo": "skimage:coffee", "held_by": "nobody"},
        {"thing": "note", "text": "x", "at": [1.5, 0.5], "size": 2},
        {"thing": "cup", "photo": "skimage:coffee", "at": [0.5, 0.5], "height": 0},
        "a cup",
    ]
    bad["scenes"][1]["things"] = [{"thing": "cup", "photo": "skimage:coffee", "held_by": "ravi"}]  # not present
    problems = " | ".join(validate_things(bad))
    for expected in (
        "thing 0: needs `thing`",
        "thing 1: needs either `photo` or `text`",
        "thing 2: held_by 'nobody'",
        "thing 3: unknown key(s) ['size']",
        "thing 3: needs `at: [x, y]`",
        "thing 4: height",
        "thing 5: a thing is a mapping",
        "scene 1 thing 0: held_by 'ravi'",
    ):
        assert expected in problems, expected
    assert validate_things(bad) == [p for p in validate(bad) if "thing" in p]


def test_a_rendered_note_is_read_back_by_the_embedded_ocr():
    pytest.importorskip("rapidocr")
    from m3_perception.text.ocr import make_reader

    note = render_note("Dentist Wednesday 4 pm", 640)
    frame = np.full((480, 640, 3), 180, np.uint8)
    frame[100 : 100 + note.shape[0], 400 : 400 + note.shape[1]] = note
    lines = make_reader("rapidocr").read(frame)
    assert " ".join(line.text for line in sorted(lines, key=lambda line: line.y)) == "Dentist Wednesday 4 pm"


def test_an_episode_with_things_is_replayed_with_seeing_on(tmp_path):
    assert seeing_parameters(tmp_path) == {}  # nothing rendered
    (tmp_path / "truth.json").write_text('{"scenes": [{"things": []}]}')
    assert seeing_parameters(tmp_path) == {}
    (tmp_path / "truth.json").write_text('{"scenes": [{"things": []}, {"things": [{"thing": "cup"}]}]}')
    assert seeing_parameters(tmp_path) == {"perception_node": SEEING}


def test_the_demo_has_six_questions_only_seeing_answers():
    """Questions about things nobody names aloud: the things, and words only written on them."""
    import re

    def words(text: str) -> set[str]:
        return set(re.findall(r"[a-z]+", text.lower()))

    script = yaml.safe_load((DEMO / "episode.yaml").read_text())
    assert validate(script) == []
    said = words(" ".join(line[1] for scene in script["scenes"] for line in scene["lines"]))
    things = [t for scene in script["scenes"] for t in scene.get("things", [])]
    labels = {t["thing"] for t in things}
    written = words(" ".join(t.get("text", "") for t in things)) - said
    assert labels >= {"cup", "cat", "note", "sign"} and not labels & said and written
    seeing = [q for q in script["questions"] if q.get("seen")]
    assert len(seeing) >= 6
    for q in seeing:  # each asks about a thing or what is written on one, or has one for its answer
        assert words(f"{q['q']} {q['a']}") & (labels | written), q["q"]


def test_the_bench_counts_the_questions_only_seeing_answers():
    from m3_agent.bench.replay import seeing_figures

    script = yaml.safe_load((DEMO / "episode.yaml").read_text())
    records = [{"question": q["q"], "verdict": i % 2 == 0} for i, q in enumerate(script["questions"])]
    seen = [r for r, q in zip(records, script["questions"], strict=True) if q.get("seen")]
    assert seeing_figures(None, records) == {
        "seeing_questions": len(seen),
        "seeing_right": sum(r["verdict"] for r in seen),
    }
    assert seeing_figures(DEMO / "episode_unseen.yaml", records)["seeing_questions"] == 0  # other questions
