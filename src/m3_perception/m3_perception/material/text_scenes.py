"""Test and bench material for OCR (m3_perception.text): real photographs with notes and signs pasted in.

The photographs ship inside installed packages (scikit-image, matplotlib), the text is rendered
with matplotlib's DejaVu Sans, and each scene is degraded the way a robot camera degrades it:
the note rotated a few degrees, the frame Gaussian-blurred and JPEG-compressed (quality 70). Every note's
text and where it landed are returned, so a reading can be scored (CER) and located.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PHOTOS = ("coffee", "chelsea", "astronaut", "hopper", "rocket", "motorcycle")


@dataclass(frozen=True)
class Note:
    """A paper note or sign: its lines, top-left corner in the frame, size and tilt."""

    lines: tuple[str, ...]
    x: int
    y: int
    font_px: int = 24
    angle_deg: float = 7.0
    paper: tuple[int, int, int] = (250, 246, 210)
    ink: tuple[int, int, int] = (25, 25, 60)
    font: str = "DejaVuSans.ttf"  # any of matplotlib's mpl-data/fonts/ttf

    @property
    def text(self) -> str:
        return " ".join(self.lines)


@dataclass
class Scene:
    """A rendered frame (RGB uint8) and, per note, its axis-aligned box (x, y, w, h) in the frame."""

    frame: np.ndarray
    notes: list[Note]
    boxes: list[tuple[int, int, int, int]] = field(default_factory=list)


# (photo, notes): notes and signs a robot meets, in several colours, sizes and fonts.
NOTE_SCENES = [
    ("coffee", [Note(("Meeting at 3 pm", "Room 204, bring keys"), 30, 40, 24, 7.0)]),
    (
        "chelsea",
        [
            Note(("CAUTION",), 380, 60, 40, -6.0, paper=(245, 200, 40), ink=(10, 10, 10), font="DejaVuSans-Bold.ttf"),
            Note(("Feed the cat at 6",), 40, 360, 22, 5.0),
        ],
    ),
    ("astronaut", [Note(("Dr. Alice Chen", "Office 12"), 400, 300, 22, -8.0, font="DejaVuSerif.ttf")]),
    (
        "hopper",
        [
            Note(("KITCHEN",), 220, 20, 36, 5.0, paper=(30, 90, 160), ink=(255, 255, 255)),
            Note(("Milk, eggs, bread",), 60, 380, 20, -7.0),
        ],
    ),
    ("rocket", [Note(("Exit",), 500, 30, 30, 6.0, paper=(30, 140, 60), ink=(255, 255, 255))]),
]


def font_path(name: str = "DejaVuSans.ttf") -> Path:
    """A font shipped with matplotlib (always installed with it, unlike system fonts)."""
    import matplotlib

    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name


def photo(name: str) -> np.ndarray:
    """A real RGB photograph shipped in scikit-image or matplotlib."""
    import skimage.data

    if name == "hopper":
        import matplotlib.cbook
        from PIL import Image

        with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
            return np.asarray(Image.open(f).convert("RGB"))
    loaders = {
        "coffee": skimage.data.coffee,
        "chelsea": skimage.data.chelsea,
        "astronaut": skimage.data.astronaut,
        "rocket": skimage.data.rocket,
        "motorcycle": lambda: skimage.data.stereo_motorcycle()[0],
    }
    if name not in loaders:
        raise ValueError(f"unknown photo {name!r}; expected one of {', '.join(PHOTOS)}")
    return np.ascontiguousarray(loaders[name]()[:, :, :3])


def page_photo() -> tuple[np.ndarray, list[str]]:
    """scikit-image's `page`: a real photo of a printed book page (grey, uneven light), and its lines."""
    import skimage.data

    grey = skimage.data.page()
    lines = [
        "Region-based segmentation",
        "Let us first determine markers of the coins and the",
        "background. These markers are pixels that we can label",
        "unambiguously as either object or background. Here,",
        "the markers are found at the two extreme parts of the",
        "histogram of grey values:",
        ">>> markers = np.zeros_like(coins)",
    ]
    return np.repeat(grey[:, :, None], 3, axis=2), lines


def render_scene(
    background: str | np.ndarray,
    notes: list[Note],
    size: tuple[int, int] = (640, 480),
    blur_px: float = 0.8,
    jpeg_quality: int = 70,
) -> Scene:
    """The photo resized to `size` (w, h), the notes pasted on it, blurred and JPEG-compressed."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    base = photo(background) if isinstance(background, str) else background
    canvas = Image.fromarray(base).convert("RGB").resize(size, Image.Resampling.LANCZOS)
    boxes = []
    for note in notes:
        font = ImageFont.truetype(str(font_path(note.font)), note.font_px)
        pad = note.font_px // 2
        step = int(note.font_px * 1.35)
        width = max(int(font.getlength(line)) for line in note.lines) + 2 * pad
        height = step * len(note.lines) + 2 * pad - (step - note.font_px)
        card = Image.new("RGBA", (width, height), (*note.paper, 255))
        draw = ImageDraw.Draw(card)
        for i, line in enumerate(note.lines):
            draw.text((pad, pad + i * step), line, font=font, fill=(*note.ink, 255))
        card = card.rotate(note.angle_deg, expand=True, resample=Image.Resampling.BICUBIC)
        canvas.paste(card, (note.x, note.y), card)
        boxes.append((note.x, note.y, card.width, card.height))
    if blur_px > 0:
        canvas = canvas.filter(ImageFilter.GaussianBlur(blur_px))
    buffer = io.BytesIO()
    canvas.save(buffer, "JPEG", quality=jpeg_quality)
    frame = np.asarray(Image.open(buffer).convert("RGB"))
    return Scene(frame, list(notes), boxes)


def read_in_box(lines: list, box: tuple[int, int, int, int]) -> str:
    """The text of the read lines whose centre lies in `box`, top to bottom, joined by spaces."""
    x, y, w, h = box
    inside = [ln for ln in lines if x <= ln.x + ln.w / 2 <= x + w and y <= ln.y + ln.h / 2 <= y + h]
    inside.sort(key=lambda ln: (ln.y + ln.h / 2, ln.x))
    return " ".join(ln.text for ln in inside)
