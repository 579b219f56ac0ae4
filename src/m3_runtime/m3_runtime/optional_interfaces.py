"""Message packages the nodes use only where they are installed (audio_common_msgs, hri_msgs, vision_msgs).

The project neither ships nor requires them: they are imported by name at start-up, and asking for a
feature whose package is missing stops the node with one line naming the package.
"""

from __future__ import annotations

import importlib

OPTIONAL_MODES = ("auto", "enabled", "disabled")  # an output's parameter: on when installed / required / off
HRI_MODES = OPTIONAL_MODES
VISION_MESSAGES = ("Detection2DArray", "Detection2D", "ObjectHypothesisWithPose")


class MissingInterfaces(RuntimeError):
    """A feature was asked for whose message package is not importable; the message names it."""


def import_messages(package: str, names: tuple[str, ...], wanted_by: str) -> tuple[type, ...]:
    """The message classes `package.msg.<name>`, with their type support loaded (a package found on
    PYTHONPATH whose C libraries are not on LD_LIBRARY_PATH fails here, not at the first publish)."""
    from rclpy.type_support import check_for_type_support

    try:
        module = importlib.import_module(f"{package}.msg")
        classes = tuple(getattr(module, name) for name in names)
        for cls in classes:
            check_for_type_support(cls)
    except (ImportError, AttributeError) as error:
        raise MissingInterfaces(
            f"{wanted_by} needs the ROS 2 message package {package}, which is not importable here ({error}); "
            f"install it (apt: ros-jazzy-{package.replace('_', '-')}) or build it into a workspace and source "
            "its setup file"
        ) from error
    return classes


def optional_messages(package: str, names: tuple[str, ...], mode: str, parameter: str) -> tuple[type, ...] | None:
    """`package`'s message classes when the output that `parameter` (its mode) governs is on, else None.
    'auto': on when the package is importable; 'enabled': on, and MissingInterfaces when it is not;
    'disabled': off."""
    if mode not in OPTIONAL_MODES:
        raise ValueError(f"{parameter} must be one of {list(OPTIONAL_MODES)}, got {mode!r}")
    if mode == "disabled":
        return None
    try:
        return import_messages(package, names, f"{parameter} 'enabled'")
    except MissingInterfaces:
        if mode == "enabled":
            raise
        return None


def hri_messages(mode: str) -> tuple[type, type] | None:
    """(IdsList, IdsMatch) when REP-155 output is on (publish_hri), else None."""
    return optional_messages("hri_msgs", ("IdsList", "IdsMatch"), mode, "publish_hri")  # type: ignore[return-value]


def vision_messages(mode: str) -> tuple[type, ...] | None:
    """vision_msgs' VISION_MESSAGES classes when the Detection2DArray output is on (publish_vision_msgs), else None."""
    return optional_messages("vision_msgs", VISION_MESSAGES, mode, "publish_vision_msgs")
