"""Things in a scripted scene (issue 23): real photographs of objects and rendered notes that the camera
sees, so that an episode can ask what only seeing answers.

A scene may list `things`, drawn in every frame of the scene:

    things:
      - {thing: cup, photo: "skimage:coffee", crop: [150, 0, 330, 330], at: [0.86, 0.8], height: 0.22}
      - {thing: note, text: "Recycling goes out on Thursday", at: [0.14, 0.42]}
      - {thing: cup, photo: "skimage:coffee", crop: [150, 0, 330, 330], held_by: bob}

- `thing`: what it is (the truth's label; the detector is never told);
- `photo` (a package photograph, as people's photos, with an optional `crop`) or `text` (a note or sign,
  rendered black on paper, turned a few degrees, as a note pinned up by hand);
- `at`: [x of its centre, y of its bottom] as fractions of the frame; or `held_by`: a person present in
  the scene, whose portrait carries it wherever that person is drawn (a pick-up is a thing on a table in
  one scene and in someone's hand in the next);
- `height`: fraction of the frame's height (photos; default 0.22).

A rendered episode with things is replayed with seeing on (`seeing_parameters`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from m3_agent.demo.photos import crop_photo, load_photo, scale_to_height

THING_KEYS = frozenset({"thing", "photo", "crop", "text", "at", "held_by", "height"})
DEFAULT_HEIGHT = 0.22
NOTE_CHARS_PER_LINE = 14
NOTE_TILT_DEG = 4.0
# What a replay of an episode with things turns on: the embedded detector and OCR (config/m3.yaml).
SEEING = {"object_backend": "yolov3_tiny", "text_backend": "rapidocr"}

Box = tuple[int, int, int, int]  # x, y, width, height [px]


def _problems(thing: object, where: str, present: list[str], people: dict) -> list[str]:
    if not isinstance(thing, dict):
        return [f"{where}: a thing is a mapping such as {{thing: cup, photo: ..., at: [x, y]}}"]
    problems = [f"{where}: unknown key(s) {sorted(set(thing) - THING_KEYS)}"] if set(thing) - THING_KEYS else []
    if not str(thing.get("thing", "")).strip():
        problems.append(f"{where}: needs `thing`, what it is")
    if ("photo" in thing) == ("text" in thing):
        problems.append(f"{where}: needs either `photo` or `text`")
    holder = thing.get("held_by")
    if holder is not None and (holder not in present or not (people.get(holder) or {}).get("photo")):
        problems.append(f"{where}: held_by {holder!r} is not a person drawn in the scene")
    at = thing.get("at")
    if holder is None and not (
        isinstance(at, list) and len(at) == 2 and all(isinstance(v, int | float) and 0 <= v <= 1 for v in at)
    ):
        problems.append(f"{where}: needs `at: [x, y]` (fractions of the frame) or `held_by`")
    height = thing.get("height", DEFAULT_HEIGHT)
    if not (isinstance(height, int | float) and 0 < height <= 1):
        problems.append(f"{where}: height must be a fraction of the frame in (0, 1]")
    return problems


def validate_things(script: dict) -> list[str]:
    """Problems with the scenes' things (empty: fine)."""
    people = script.get("people") or {}
    problems = []
    for si, scene in enumerate(script.get("scenes") or []):
        things = scene.get("things", [])
        if not isinstance(things, list):
            problems.append(f"scene {si}: things must be a list")
            continue
        for ti, thing in enumerate(things):
            problems += _problems(thing, f"scene {si} thing {ti}", list(scene.get("present", [])), people)
    return problems


def thing_key(thing: dict) -> str:
    """One image per distinct photo crop or text."""
    return f"text:{thing['text']}" if "text" in thing else f"photo:{thing['photo']}:{thing.get('crop')}"


def render_note(text: str, frame_width: int) -> np.ndarray:
    """A paper note with the text in black capitals-and-lower case, wrapped, turned NOTE_TILT_DEG."""
    import cv2

    words, lines = str(text).split(), [""]
    for word in words:
        if lines[-1] and len(lines[-1]) + 1 + len(word) > NOTE_CHARS_PER_LINE:
            lines.append(word)
        else:
            lines[-1] = f"{lines[-1]} {word}".strip()
    font, scale, thickness = cv2.FONT_HERSHEY_DUPLEX, frame_width / 1000, max(1, round(frame_width / 500))
    sizes = [cv2.getTextSize(line, font, scale, thickness)[0] for line in lines]
    pad, step = round(12 * scale), max(h for _, h in sizes) * 2
    width, height = max(w for w, _ in sizes) + 2 * pad, step * len(lines) + pad
    card = np.full((height, width, 3), (246, 240, 214), np.uint8)
    for i, line in enumerate(lines):
        cv2.putText(card, line, (pad, pad + step * i + sizes[i][1]), font, scale, (20, 20, 20), thickness, cv2.LINE_AA)
    angle = NOTE_TILT_DEG * (1 if len(text) % 2 else -1)  # some notes lean left, some right
    turn = cv2.getRotationMatrix2D((width / 2, height / 2), angle, 1.0)
    cos, sin = abs(math.cos(math.radians(angle))), abs(math.sin(math.radians(angle)))
    out_w, out_h = int(width * cos + height * sin), int(width * sin + height * cos)
    turn[:, 2] += ((out_w - width) / 2, (out_h - height) / 2)
    return cv2.warpAffine(card, turn, (out_w, out_h), borderMode=cv2.BORDER_REPLICATE)


def thing_images(scenes: list, frame_width: int, frame_height: int) -> dict[str, np.ndarray]:
    """Each distinct thing of the scenes (truth Scene objects), at the size it is drawn."""
    images: dict[str, np.ndarray] = {}
    for scene in scenes:
        for thing in scene.things:
            key = thing_key(thing)
            if key in images:
                continue
            if "text" in thing:
                images[key] = render_note(thing["text"], frame_width)
            else:
                photo = crop_photo(load_photo(thing["photo"]), thing.get("crop"))
                images[key] = scale_to_height(photo, round(frame_height * float(thing.get("height", DEFAULT_HEIGHT))))
    return images


def _paste(frame: np.ndarray, image: np.ndarray, x0: int, y0: int) -> None:
    h, w = image.shape[:2]
    x0 = int(np.clip(x0, 0, max(0, frame.shape[1] - w)))
    y0 = int(np.clip(y0, 0, max(0, frame.shape[0] - h)))
    frame[y0 : y0 + h, x0 : x0 + w] = image[: frame.shape[0] - y0, : frame.shape[1] - x0]


def draw_things(
    frame: np.ndarray, things: list[dict], images: dict[str, np.ndarray], portraits: dict[str, Box]
) -> None:
    """Draw a scene's things: with `portraits` empty, those that stand somewhere (before people are
    drawn); with the portraits drawn, those their holders carry, in front of the holder's lower body."""
    height, width = frame.shape[:2]
    for thing in things:
        image = images[thing_key(thing)]
        holder = thing.get("held_by")
        if holder is None and not portraits:
            x, y = thing["at"]
            _paste(frame, image, round(x * width - image.shape[1] / 2), round(y * height - image.shape[0]))
        elif holder is not None and holder in portraits:
            px, py, pw, ph = portraits[holder]
            scale = min(1.0, 0.55 * ph / image.shape[0])  # a portrait drawn small carries it smaller
            if scale < 1.0:
                import cv2

                image = cv2.resize(
                    image, (max(1, round(image.shape[1] * scale)), max(1, round(image.shape[0] * scale)))
                )
            _paste(frame, image, round(px + 0.72 * pw - image.shape[1] / 2), py + ph - image.shape[0])


def seeing_parameters(episode_dir: str | Path) -> dict[str, dict[str, object]]:
    """Perception parameters for a rendered episode: seeing on when its scenes have things; {} else."""
    truth = Path(episode_dir) / "truth.json"
    if not truth.exists():
        return {}
    scenes = json.loads(truth.read_text()).get("scenes", [])
    return {"perception_node": dict(SEEING)} if any(scene.get("things") for scene in scenes) else {}
