"""A rosbags type store that knows ROS 2 Jazzy's types and the m3_interfaces messages."""

from __future__ import annotations

import functools
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

AUDIO_CHUNK = "m3_interfaces/msg/AudioChunk"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"


def _interface_msg_dir() -> Path:
    """The installed m3_interfaces msg/ folder, or the source tree's when run from a checkout."""
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("m3_interfaces")) / "msg"
    except Exception:  # noqa: BLE001 - not installed: fall back to the checkout
        return Path(__file__).resolve().parents[2] / "src" / "m3_interfaces" / "msg"


@functools.cache
def m3_typestore() -> Typestore:
    store = get_typestore(Stores.ROS2_JAZZY)
    msg_dir = _interface_msg_dir()
    if not msg_dir.is_dir():
        raise FileNotFoundError(f"m3_interfaces message definitions not found in {msg_dir}")
    types = {}
    for msg_file in sorted(msg_dir.glob("*.msg")):
        types.update(get_types_from_msg(msg_file.read_text(), f"m3_interfaces/msg/{msg_file.stem}"))
    store.register(types)
    return store
