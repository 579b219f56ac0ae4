"""Real photographs from installed packages (scikit-image, matplotlib), and the crops and sizes the
generator draws them at: people's portraits and the things in their scenes."""

from __future__ import annotations

import numpy as np


def load_photo(spec: str) -> np.ndarray:
    """'skimage:astronaut' or 'matplotlib:grace_hopper.jpg' -> RGB uint8."""
    source, _, name = spec.partition(":")
    if source == "skimage":
        import skimage.data

        image = getattr(skimage.data, name)()
    elif source == "matplotlib":
        from matplotlib import cbook
        from PIL import Image

        with Image.open(cbook.get_sample_data(name)) as photo:
            image = np.asarray(photo.convert("RGB"))
    else:
        raise ValueError(f"unknown photo source {spec!r}: use skimage:NAME or matplotlib:FILE")
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[..., :3])


def crop_photo(photo: np.ndarray, box: list[int] | None) -> np.ndarray:
    """The script's head-and-shoulders box [x, y, w, h] of a photo (None: the whole photo)."""
    if box is None:
        return photo
    x, y, w, h = box
    return np.ascontiguousarray(photo[y : y + h, x : x + w])


def scale_to_height(photo: np.ndarray, height: int) -> np.ndarray:
    """The photo resized to `height` pixels, aspect kept (how a person is drawn, and matched by face)."""
    import cv2

    width = round(photo.shape[1] * height / photo.shape[0])
    return cv2.resize(photo, (width, height), interpolation=cv2.INTER_AREA)
