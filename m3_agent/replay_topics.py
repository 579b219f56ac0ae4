"""Which of a recording's topics a replay reads: the camera and microphone topics perception subscribes
to, and the pose topic the memory node follows.

Why apart from the replay (m3_agent.replay): the inputs are chosen once, from the recording's topic list
and the nodes' parameters, before any message is read; the replay then only reads them.
"""

from __future__ import annotations

import logging

RAW_IMAGE = "sensor_msgs/msg/Image"
log = logging.getLogger("m3_agent.replay")


def pick_topic(topics: dict[str, tuple[str, int]], types: tuple[str, ...], wanted: str) -> str | None:
    """wanted when the recording has it with one of types, else the recording's only topic of those
    types (None: none, or several to choose from)."""
    if wanted in topics and topics[wanted][0] in types:
        return wanted
    candidates = [t for t, (msgtype, _) in topics.items() if msgtype in types]
    return candidates[0] if len(candidates) == 1 else None


def pose_reader(memory_params: dict, topics: dict[str, tuple[str, int]]):
    """(topic, PoseTrack, the Pose inside a message) of the recording's pose topic, as the memory node follows
    it (pose_topic of pose_type in pose_frame_id); (None, None, None) without one: memories get no place."""
    from m3_memory.place.poses import PoseTrack
    from m3_memory.pose_input import POSE_OF

    topic = memory_params["pose_topic"]
    if not topic:
        return None, None, None
    type_name, pose_of = POSE_OF[memory_params["pose_type"]]
    if topics.get(topic, ("", 0))[0] != type_name:
        log.warning("the recording has no %s topic %s: its memories get no place", type_name, topic)
        return None, None, None
    return topic, PoseTrack(memory_params["pose_frame_id"]), pose_of
