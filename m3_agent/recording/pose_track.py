"""A robot's pose track from a CSV or JSON file, for `m3 video2bag --poses`: where the robot was while the
video was recorded, written into the bag as geometry_msgs/PoseWithCovarianceStamped (what AMCL publishes), so
a replay gives the memory node its pose topic.

CSV: a header row naming the columns `t` (media time [s], from the video's start), `x`, `y` [m], `yaw` [rad]
and optionally `frame_id`; one pose per row. JSON: a list of objects with those keys, or
{"frame_id": "map", "poses": [...]}. Times must rise; every number must be finite.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 64 * 1024 * 1024
COLUMNS = ("t", "x", "y", "yaw")


class PoseFileError(ValueError):
    """A pose file that cannot be used; the message names the file and the row at fault."""


@dataclass(frozen=True)
class TrackPose:
    t_s: float  # media time [s]
    x: float  # [m]
    y: float  # [m]
    yaw: float  # [rad]
    frame_id: str


def _number(path: Path, where: str, name: str, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PoseFileError(f"{path}: {where}: {name} is not a number ({value!r})") from None
    if not math.isfinite(number):
        raise PoseFileError(f"{path}: {where}: {name} is not finite ({value!r})")
    return number


def _rows(path: Path, text: str) -> tuple[list[dict], str]:
    """The pose rows and the file's default frame."""
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as error:
            raise PoseFileError(f"{path}: not JSON ({error})") from None
        if isinstance(data, dict):
            return data.get("poses"), str(data.get("frame_id", "map"))
        return data, "map"
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise PoseFileError(f"{path}: the CSV header lacks {missing} (columns: t, x, y, yaw[, frame_id])")
    return list(reader), "map"


def load_poses(path: str | Path) -> list[TrackPose]:
    """The poses of a CSV or JSON file, checked (PoseFileError otherwise)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise PoseFileError(f"{path}: larger than {MAX_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PoseFileError(f"{path}: unreadable ({error})") from None
    rows, default_frame = _rows(path, text)
    if not isinstance(rows, list) or not rows:
        raise PoseFileError(f"{path}: no poses (a CSV with rows, or a JSON list of poses)")
    poses: list[TrackPose] = []
    for i, row in enumerate(rows, 1):
        where = f"pose {i}"
        if not isinstance(row, dict):
            raise PoseFileError(f"{path}: {where} is not an object with t, x, y, yaw")
        values = [_number(path, where, name, row.get(name)) for name in COLUMNS]
        frame = str(row.get("frame_id") or default_frame)
        pose = TrackPose(*values, frame_id=frame)
        if pose.t_s < 0 or (poses and pose.t_s <= poses[-1].t_s):
            raise PoseFileError(f"{path}: {where}: t {pose.t_s} s must be >= 0 and after the pose before")
        poses.append(pose)
    return poses
