"""What a robot id may be: the node's `robot_id` parameter and a search request's robot_id.

A robot id is written into Milvus keys ("<robot_id>/<kind>/<key>") and filter expressions, so it is
checked once, here, before it reaches either: letters, digits, '_', '.', '-', at most 64, starting
with a letter or digit; "fleet" is the namespace of a fleet's shared people, never a robot.

Whose memories a search may name, one rule for the memory services and the control node's goals
(issue 21, D4): "" (every robot sharing the memory) and the memory's own robot id always; another
robot's id only where the memory has a fleet (Milvus with a fleet_slot). Elsewhere it is refused with
"no fleet: ..." (m3_memory.search.fleet): INVALID_ARGUMENT on the services, INVALID_GOAL on a goal.
"""

from __future__ import annotations

import re

ROBOT_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
RESERVED = ("fleet",)  # m3_memory.milvus.writer.FLEET_NAMESPACE


def robot_id_problem(robot_id: object) -> str:
    """Why robot_id is not a valid robot id ("" when it is)."""
    if not isinstance(robot_id, str) or not ROBOT_ID_RE.fullmatch(robot_id):
        return (
            f"robot_id {robot_id!r} is not a valid robot id: 1 to 64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    if robot_id in RESERVED:
        return f"robot_id {robot_id!r} is reserved (the namespace of a fleet's shared people)"
    return ""


def check_robot_id(robot_id: object) -> str:
    """robot_id itself, or ValueError saying what a robot id may be."""
    problem = robot_id_problem(robot_id)
    if problem:
        raise ValueError(problem)
    return robot_id  # type: ignore[return-value]
