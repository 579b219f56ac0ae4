"""Written text (OCR) on real photographs: what the real model reads, text regions over frames,
the keyframe gate, CER, and bad input.

The scenes are real photographs shipped in scikit-image and matplotlib with notes and signs
rendered in (DejaVu fonts), rotated 5-8 degrees, Gaussian-blurred and JPEG-compressed at quality
70; plus scikit-image's `page`, a real camera photo of a printed book page. One OCR engine serves
the whole module.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from m3_perception.material.text_scenes import NOTE_SCENES, Note, page_photo, photo, read_in_box, render_scene
from m3_perception.model_files import ModelFileMissing
from m3_perception.text import rapidocr_reader
from m3_perception.text.cer import cer, levenshtein, normalize_whitespace, similarity
from m3_perception.text.ocr import NoTextReader, TextLine, TextReader, make_reader, reading_scale
from m3_perception.text.regions import KeyframeGate, TextRegionTracker, overlap, thumbnail

SCENES = NOTE_SCENES


@pytest.fixture(scope="module")
def reader() -> TextReader:
    return make_reader("rapidocr", min_confidence=0.8, max_side_px=960)


def line(text: str, x: int, y: int, w: int = 120, h: int = 24, confidence: float = 0.95) -> TextLine:
    quad = np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]], float)
    return TextLine.from_quad(text, confidence, quad, 640, 480)


@pytest.mark.parametrize("background,notes", SCENES, ids=[s[0] for s in SCENES])
def test_reads_notes_on_real_photos(reader: TextReader, background: str, notes: list[Note]) -> None:
    scene = render_scene(background, notes)
    start = time.perf_counter()
    lines = reader.read(scene.frame)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0  # about 0.35 s on 2 free cores; generous for a shared machine
    for note, box in zip(scene.notes, scene.boxes, strict=True):
        got = read_in_box(lines, box)
        assert cer(note.text, got) <= 0.05, (note.text, got)
    for ln in lines:
        assert 0.8 <= ln.confidence <= 1.0
        assert 0 <= ln.x and 0 <= ln.y and ln.x + ln.w <= 640 and ln.y + ln.h <= 480
        assert len(ln.quad) == 4
    # Nothing is read outside the notes.
    assert all(any(read_in_box([ln], box) for box in scene.boxes) for ln in lines)


def test_boxes_map_back_from_a_downscaled_frame(reader: TextReader) -> None:
    note = Note(("Meeting at 3 pm", "Room 204, bring keys"), 100, 120, 44, 6.0)
    scene = render_scene("coffee", [note], size=(1280, 960), blur_px=1.2)
    lines = reader.read(scene.frame)  # read at 960x720, boxes in 1280x960 pixels
    assert cer(note.text, read_in_box(lines, scene.boxes[0])) <= 0.05
    x, y, w, h = scene.boxes[0]
    for ln in lines:
        assert x - 8 <= ln.x and ln.x + ln.w <= x + w + 8 and y - 8 <= ln.y and ln.y + ln.h <= y + h + 8
        assert ln.w > 200  # a 1280-px frame's pixels, not the 960-px copy's


def test_reads_a_real_photo_of_a_printed_page(reader: TextReader) -> None:
    """Small print (x-height about 6 px): read only with the frame upscaled (min_side_px)."""
    image, truth = page_photo()
    unscaled = " ".join(ln.text for ln in reader.read(image))  # at its own 384x191: most lines lost
    assert cer(" ".join(truth), unscaled) > 0.1
    reader.min_side_px, reader.max_side_px = 736, 1600  # type: ignore[attr-defined]
    try:
        lines = reader.read(image)
    finally:
        reader.min_side_px, reader.max_side_px = 0, 960  # type: ignore[attr-defined]
    texts = [ln.text for ln in lines]
    good = sum(any(cer(t, got) <= 0.05 for got in texts) for t in truth)
    assert good >= 6, texts  # the code line loses its ">>> " prompt
    assert cer(" ".join(truth), " ".join(texts)) <= 0.05
    assert all(ln.x + ln.w <= image.shape[1] and ln.y + ln.h <= image.shape[0] for ln in lines)


@pytest.mark.parametrize("background", ["coffee", "chelsea", "astronaut", "hopper", "rocket", "motorcycle"])
def test_photos_without_text_give_no_line(reader: TextReader, background: str) -> None:
    assert reader.read(render_scene(background, []).frame) == []


def test_handwriting_is_not_read(reader: TextReader) -> None:
    """scikit-image's `text` (handwritten maths on paper): a known limit; nothing is invented."""
    import skimage.data

    grey = skimage.data.text()
    assert reader.read(np.repeat(grey[:, :, None], 3, axis=2)) == []


def test_regions_over_a_real_sequence(reader: TextReader) -> None:
    """A sign seen in three frames as the camera drifts: one region, stable id, first/last seen."""
    tracker = TextRegionTracker()
    for i, stamp in enumerate((10.0, 12.0, 14.0)):
        scene = render_scene(
            "hopper", [Note(("KITCHEN",), 220 + 6 * i, 20 + 3 * i, 36, 5.0 + i)], jpeg_quality=70 - 10 * i
        )
        sightings = tracker.update(reader.read(scene.frame), stamp)
        assert [s.region.region_id for s in sightings] == ["text_1"]
        assert sightings[0].new == (i == 0)
    (region,) = tracker.regions
    assert region.text == "KITCHEN" and region.sightings == 3
    assert (region.first_seen, region.last_seen) == (10.0, 14.0)


def test_tracker_dedups_and_keeps_the_best_reading() -> None:
    tracker = TextRegionTracker()
    first = tracker.update([line("Exlt", 500, 30, 60, 30, 0.82), line("Room 204", 40, 300)], 1.0)
    assert [s.region.region_id for s in first] == ["text_1", "text_2"] and all(s.new for s in first)
    # Same place, one character different, more confident: same region, better text.
    second = tracker.update([line("Exit", 505, 32, 60, 30, 0.99)], 2.0)
    assert second[0].region.region_id == "text_1" and second[0].improved and not second[0].new
    # A worse reading later does not replace it.
    tracker.update([line("Ex1t", 503, 31, 60, 30, 0.85)], 3.0)
    region = tracker.regions[0]
    assert (region.text, region.confidence, region.sightings) == ("Exit", 0.99, 3)
    assert (region.first_seen, region.last_seen) == (1.0, 3.0)
    assert region.readings == {"Exlt": 1, "Exit": 1, "Ex1t": 1}
    # Same text elsewhere, or other text at the same place: new regions.
    third = tracker.update([line("Exit", 100, 400, 60, 30), line("Stairs", 500, 30, 60, 30)], 4.0)
    assert [s.region.region_id for s in third] == ["text_3", "text_4"]
    # Two identical signs side by side in one frame stay two regions.
    fourth = tracker.update([line("Exit", 100, 400, 60, 30), line("Exit", 150, 400, 60, 30)], 5.0)
    assert {s.region.region_id for s in fourth} == {"text_3", "text_5"}
    assert [r.region_id for r in tracker.seen_since(5.0)] == ["text_3", "text_5"]


def test_keyframe_gate() -> None:
    gate = KeyframeGate(interval_s=5.0, min_gap_s=1.0, change_threshold=0.08)
    view = render_scene("chelsea", []).frame
    same = render_scene("chelsea", [], jpeg_quality=50).frame  # re-encoded: noise, not a new view
    other = render_scene("rocket", []).frame
    assert gate.decide(view, 0.0).reason == "first"
    assert not gate.decide(same, 0.5)
    assert not gate.decide(other, 0.5)  # changed, but too soon after the last read
    assert not gate.decide(same, 3.0) and gate.decide(same, 3.0).change < 0.02
    changed = gate.decide(other, 3.0)
    assert changed and changed.reason == "change" and changed.change >= 0.08
    assert not gate.decide(other, 7.9)
    assert gate.decide(other, 8.0).reason == "interval"
    assert gate.decide(other, 2.0).reason == "clock"  # stream time went back (replay restarted)
    with pytest.raises(ValueError):
        gate.decide(view.astype(np.float32), 9.0)
    with pytest.raises(ValueError):
        KeyframeGate(interval_s=1.0, min_gap_s=2.0)
    with pytest.raises(ValueError):
        KeyframeGate(change_threshold=0.0)


def test_thumbnail_and_overlap() -> None:
    for shape in [(480, 640, 3), (8, 8, 3), (23, 700, 3)]:
        thumb = thumbnail(np.full(shape, 255, np.uint8))
        assert thumb.shape == (24, 32) and np.allclose(thumb, 1.0)
    assert overlap((0, 0, 10, 10), (2, 2, 4, 4)) == 1.0
    assert overlap((0, 0, 10, 10), (20, 0, 10, 10)) == 0.0
    assert overlap((0, 0, 10, 10), (5, 0, 10, 10)) == 0.5


def test_cer() -> None:
    assert levenshtein("kitten", "sitting") == 3 and levenshtein("", "abc") == 3
    assert normalize_whitespace("  Room\n 204 \t") == "Room 204"
    assert cer("Room 204", "Room  204") == 0.0
    assert cer("Room 204", "Room 2O4") == pytest.approx(1 / 8)
    assert cer("", "") == 0.0 and cer("", "x") == 1.0 and cer("ab", "") == 1.0
    assert similarity("EXIT", "exit") == 1.0 and similarity("Exit", "Exlt") == 0.75


def test_bad_input(reader: TextReader) -> None:
    frame = np.zeros((48, 64, 3), np.uint8)
    for bad in (frame.astype(np.float32), frame[:, :, 0], np.zeros((48, 64, 4), np.uint8), frame.tolist()):
        with pytest.raises(ValueError):
            reader.read(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            NoTextReader().read(bad)  # type: ignore[arg-type]
    assert NoTextReader().read(frame) == [] and isinstance(make_reader("none"), TextReader)
    for kwargs in (
        {"backend": "tesseract"},
        {"min_confidence": 1.5},
        {"min_confidence": "high"},
        {"max_side_px": 10},
        {"max_side_px": 960.0},
        {"min_side_px": -1},
        {"threads": 0},
    ):
        with pytest.raises(ValueError, match=next(iter(kwargs)).split("_")[0]):
            make_reader(**kwargs)  # type: ignore[arg-type]


def test_reading_scale() -> None:
    assert reading_scale(480, 640, 960) == 1.0
    assert reading_scale(960, 1280, 960) == 0.75
    assert reading_scale(191, 384, 1600, 736) == pytest.approx(736 / 191)
    assert reading_scale(191, 384, 960, 736) == 2.5  # the cost cap wins


def test_missing_model_file_names_package_and_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(rapidocr_reader.MODEL_FILES, "Rec", "models/gone.onnx")
    with pytest.raises(ModelFileMissing, match=r"gone\.onnx.*rapidocr.*bash bootstrap\.sh setup"):
        make_reader("rapidocr")
    monkeypatch.setattr(rapidocr_reader, "PACKAGE", "rapidocr_not_installed")
    with pytest.raises(ModelFileMissing, match=r"rapidocr_not_installed.*bash bootstrap\.sh setup"):
        make_reader("rapidocr")


def test_photo_names() -> None:
    assert photo("motorcycle").shape[2] == 3
    with pytest.raises(ValueError):
        photo("dog")
