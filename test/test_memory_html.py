"""The HTML memory view, rendered from a store export and checked in headless Chromium."""

import base64
import re
import shutil
import subprocess

import cv2
import numpy as np
import pytest
import skimage.data

from m3_agent.view import memory_html

S = 1_000_000_000


def _jpeg(rgb: np.ndarray) -> str:
    ok, data = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    return base64.b64encode(data.tobytes()).decode()


def _entity(entity_id, kind, seq, name="", person_id="", crop=None):
    return {
        "entity_id": entity_id,
        "seq": seq,
        "kind": kind,
        "name": name,
        "person_id": person_id,
        "observation_count": 3,
        "first_clip": 0,
        "last_clip": 1,
        "crop_jpeg": crop,
    }


@pytest.fixture(scope="module")
def export():
    crop = _jpeg(skimage.data.astronaut()[60:200, 160:300])
    return {
        "clips": [
            {"clip_index": 0, "start_ns": 100 * S, "end_ns": 130 * S, "keyframe_jpeg": None},
            {"clip_index": 1, "start_ns": 130 * S, "end_ns": 160 * S, "keyframe_jpeg": crop},
        ],
        "text_nodes": [
            {
                "node_id": "episodic_1",
                "kind": "episodic",
                "text": '<face_1> says: "My name is Alice."',
                "clip_index": 0,
                "start_ns": 105 * S,
                "end_ns": 107 * S,
                "weight": 1.0,
            },
            {
                "node_id": "semantic_2",
                "kind": "semantic",
                "text": "Equivalence: <face_1>, <voice_1>",
                "clip_index": 0,
                "start_ns": 105 * S,
                "end_ns": 107 * S,
                "weight": 2.0,
            },
            {
                "node_id": "episodic_3",
                "kind": "episodic",
                "text": '<voice_9> says: "<script>alert(1)</script>"',
                "clip_index": 1,
                "start_ns": 140 * S,
                "end_ns": 142 * S,
                "weight": 1.0,
            },
        ],
        "entities": [
            _entity("face_1", "face", 1, person_id="person_1", crop=crop),
            _entity("voice_1", "voice", 1, person_id="person_1"),
            _entity("voice_2", "voice", 2),
            _entity("person_1", "person", 1, name="Alice"),
        ],
        "aliases": [{"old_id": "voice_9", "new_id": "voice_2", "clip_index": 1, "reason": "merge"}],
    }


ANSWERS = [
    {
        "question": "What is her name?",
        "answer": "Alice",
        "ground_truth": "Alice",
        "verdict": True,
        "evidence": ["episodic_1", "node_that_does_not_exist"],
    }
]


def test_render_names_people_and_escapes_memory_text(export):
    page = memory_html.render(export, ANSWERS)
    assert "<script>alert(1)</script>" not in page  # text from memory is escaped
    assert "&lt;script&gt;" in page
    assert 'href="#episodic_1"' in page and "node_that_does_not_exist" not in page


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: bootstrap.sh installs the Debian package 'chromium'")
    return path


def test_page_in_headless_chromium(export, tmp_path):
    page = memory_html.write(export, tmp_path / "memory.html", ANSWERS, title="demo memory")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [_chromium(), *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    from html.parser import HTMLParser

    class Collect(HTMLParser):
        def __init__(self):
            super().__init__()
            self.ids, self.names, self.imgs, self._in_name = set(), [], 0, False

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if "id" in attrs:
                self.ids.add(attrs["id"])
            self._in_name = attrs.get("class") == "name"
            self.imgs += tag == "img" and attrs.get("src", "").startswith("data:image/jpeg;base64,")

        def handle_data(self, data):
            if self._in_name and data.strip():
                self.names.append(data.strip())
            self._in_name = False

    seen = Collect()
    seen.feed(dom)
    assert seen.names == ["Alice", "voice_2"]  # person with learnt name; the merged voice_9 shows as voice_2
    assert {"episodic_1", "semantic_2", "episodic_3", "clip-0", "clip-1", "person-person_1"} <= seen.ids
    assert seen.imgs == 2  # Alice's face crop on her card and the keyframe of clip 1
    visible = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    assert "2 people · 2 clips · 2 episodic · 1 semantic memories" in visible
    assert 'Alice says: "My name is Alice."' in visible  # <face_1> rendered as the person's name


def test_places_paths_and_replaced_memories_are_shown(export):
    placed = {
        **export,
        "text_places": [
            {"node_id": "episodic_1", "frame_id": "map", "x": 1.0, "y": 2.0, "yaw": 0.0, "region": "kitchen"},
            {"node_id": "episodic_3", "frame_id": "map", "x": 9.0, "y": 2.0, "yaw": 0.0, "region": ""},
        ],
        "clip_paths": [
            {"clip_index": 0, "stamp_ns": 100 * S, "frame_id": "map", "x": 0.0, "y": 2.0, "yaw": 0.0},
            {"clip_index": 1, "stamp_ns": 140 * S, "frame_id": "map", "x": 10.0, "y": 2.0, "yaw": 0.0},
        ],
        "validity": [{"node_id": "episodic_1", "valid_until_ns": 140 * S, "superseded_by": "episodic_3"}],
    }
    page = memory_html.render(placed)
    assert '<polyline points="20.0,400.0 400.0,400.0"' in page  # 10 m across the 380 px drawing, y up
    assert 'cx="58.0" cy="400.0"' in page and "episodic_1: kitchen" in page
    assert "@ kitchen" in page and "@ (9.0, 2.0) in map" in page
    assert 'class="memory episodic replaced" id="episodic_1"' in page
    assert "valid until 00:40, replaced by" in page and 'href="#episodic_3"' in page
    assert "<h2>Map</h2>" not in memory_html.render(export)  # no pose recorded: no map


def test_things_seen_are_listed_with_their_crop_place_and_memories(export):
    cup = _jpeg(skimage.data.coffee()[40:360, 140:460])
    seen = {
        **export,
        "text_nodes": [
            *export["text_nodes"],
            {
                "node_id": "episodic_4",
                "kind": "episodic",
                "text": "<face_1> holds a cup.",
                "clip_index": 1,
                "start_ns": 150 * S,
                "end_ns": 151 * S,
                "weight": 1.0,
            },
        ],
        "entities": [
            *export["entities"],
            {**_entity("object_1", "object", 1, crop=cup), "label": "cup"},
            {**_entity("text_1", "text", 1), "label": "Dentist Tuesday 3 pm"},
        ],
        "edges": [{"node_id": "episodic_4", "entity_id": "face_1"}, {"node_id": "episodic_4", "entity_id": "object_1"}],
        "sightings": [
            {
                "entity_id": "object_1",
                "clip_index": 0,
                "first_ns": 101 * S,
                "last_ns": 102 * S,
                "frame_id": "map",
                "x": 1.0,
                "y": 2.0,
                "yaw": 0.0,
                "region": "hall",
            },
            {
                "entity_id": "object_1",
                "clip_index": 1,
                "first_ns": 150 * S,
                "last_ns": 151 * S,
                "frame_id": "map",
                "x": 4.0,
                "y": 2.0,
                "yaw": 0.0,
                "region": "kitchen",
            },
            {
                "entity_id": "text_1",
                "clip_index": 1,
                "first_ns": 150 * S,
                "last_ns": 151 * S,
                "frame_id": None,
                "x": None,
                "y": None,
                "yaw": None,
                "region": None,
            },
        ],
    }
    page = memory_html.render(seen)
    assert "<h2>Things seen</h2>" in page and "2 things seen ·" in page
    card = page[page.index('id="thing-object_1"') : page.index('id="thing-text_1"')]
    assert f"data:image/jpeg;base64,{cup}" in card and ">cup<" in card
    assert "1 memories · last seen @ kitchen" in card  # the newer of its two sightings
    note = page[page.index('id="thing-text_1"') :].split("</div>\n  </div>")[0]
    assert "“Dentist Tuesday 3 pm”" in note and "last seen" not in note  # no pose when it was read
    assert 'id="person-object_1"' not in page and 'id="person-text_1"' not in page  # things are not people
    assert 'id="episodic_4" data-entities="face_1 object_1"' in page  # clicking the cup keeps its memory lit
    assert "<h2>Things seen</h2>" not in memory_html.render(export)  # nothing seen: no section
