"""Message packages the nodes use only where they are installed (audio_common_msgs, hri_msgs).

The project neither ships nor requires them: they are imported by name at start-up, and asking for a
feature whose package is missing stops the node with one line naming the package.
"""

from __future__ import annotations

import importlib

HRI_MODES = ("auto", "enabled", "disabled")


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


def hri_messages(mode: str) -> tuple[type, type] | None:
    """(IdsList, IdsMatch) when REP-155 output is on, else None. 'auto': on when hri_msgs is importable;
    'enabled': on, and MissingInterfaces when it is not; 'disabled': off."""
    if mode not in HRI_MODES:
        raise ValueError(f"publish_hri must be one of {list(HRI_MODES)}, got {mode!r}")
    if mode == "disabled":
        return None
    try:
        ids_list, ids_match = import_messages("hri_msgs", ("IdsList", "IdsMatch"), "publish_hri 'enabled'")
    except MissingInterfaces:
        if mode == "enabled":
            raise
        return None
    return ids_list, ids_match
