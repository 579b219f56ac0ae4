"""`m3 bench perception`'s seeing figures: the embedded object detector and text reader on real photos.

Objects: precision and recall at IoU 0.5 on the package photos labelled by eye
(m3_perception.objects.photo_set). Text: character error rate of each note pasted on a real photo
(m3_perception.material.text_scenes.NOTE_SCENES: rotated, blurred, JPEG-compressed), read where the
note lies. Both are measured with the embedded back-ends (yolov3_tiny, rapidocr) at the node's
settings, whether or not the node has them on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


def seeing_figures(params: Mapping[str, Any]) -> dict:
    """{"objects": precision/recall overall and per class, ms per frame; "ocr": CER per note and mean, ms per frame}."""
    from m3_perception.material.text_scenes import NOTE_SCENES, read_in_box, render_scene
    from m3_perception.objects.detectors import make_detector
    from m3_perception.objects.photo_set import evaluate
    from m3_perception.text.cer import cer
    from m3_perception.text.ocr import make_reader

    detector = make_detector(
        "yolov3_tiny",
        confidence=params["object_confidence"],
        min_box_px=params["object_min_box_px"],
        max_box_fraction=params["object_max_box_fraction"],
        nested=params["object_nested_overlap"],
    )
    objects = evaluate(detector)
    reader = make_reader(
        "rapidocr", min_confidence=params["text_min_confidence"], max_side_px=params["text_max_side_px"]
    )
    notes, elapsed = {}, 0.0
    for background, scene_notes in NOTE_SCENES:
        scene = render_scene(background, scene_notes)
        start = time.perf_counter()
        lines = reader.read(scene.frame)
        elapsed += time.perf_counter() - start
        for note, box in zip(scene.notes, scene.boxes, strict=True):
            notes[f"{background}: {note.text}"] = round(cer(note.text, read_in_box(lines, box)), 4)
    return {
        "objects": {
            **{k: objects["overall"][k] for k in ("precision", "recall", "tp", "fp", "fn")},
            "classes": objects["classes"],
            "ms_per_frame": round(objects["ms_per_frame"], 1),
        },
        "ocr": {
            "cer_mean": round(sum(notes.values()) / len(notes), 4),
            "cer_max": max(notes.values()),
            "notes": notes,
            "ms_per_frame": round(1000 * elapsed / len(NOTE_SCENES), 1),
        },
    }
