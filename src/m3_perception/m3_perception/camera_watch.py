"""Say when the camera topic the perception node listens on is silent while the other image transport's
topic is publishing: `m3 video2bag` recordings carry CompressedImage on /camera/image_raw/compressed, and
a node left at image_transport 'raw' (/camera/image_raw) would otherwise build a memory with no faces
without a word. Plain logic; the node feeds it frame arrivals and what the ROS graph shows.
"""

from __future__ import annotations

from dataclasses import dataclass

SILENCE_S = 5.0  # no frame this long on the configured topic, with the other one publishing: warn [s]
CHECK_PERIOD_S = 1.0  # how often the node looks (steady time) [s]
RAW_TYPE = "sensor_msgs/msg/Image"
COMPRESSED_TYPE = "sensor_msgs/msg/CompressedImage"


def other_transport(image_topic: str, transport: str) -> tuple[str, str, str]:
    """(topic, message type, transport) of the camera's other image transport for the image_topic parameter,
    as image_transport names them: raw on /camera/image_raw, compressed on /camera/image_raw/compressed."""
    base = image_topic.rstrip("/")
    if transport == "compressed":
        return base, RAW_TYPE, "raw"
    return f"{base}/compressed", COMPRESSED_TYPE, "compressed"


@dataclass
class CameraWatch:
    """When the configured camera topic last delivered a frame (steady seconds), and whether it was said."""

    silence_s: float = SILENCE_S
    since: float = 0.0  # inputs live, or the last frame
    warned: bool = False

    def start(self, now: float) -> None:
        self.since, self.warned = now, False

    def frame(self, now: float) -> None:
        self.since = now

    def due(self, now: float) -> bool:
        """Whether to look at the graph now: silent for silence_s and not said yet."""
        return not self.warned and now - self.since >= self.silence_s

    def message(self, topic: str, transport: str, other: str, other_type: str, other_transport: str) -> str:
        """The one warning: what is silent, what publishes instead, and the parameter that fixes it."""
        self.warned = True
        return (
            f"no camera frame on {topic} ({transport}) for {self.silence_s:.0f} s while {other} publishes "
            f"{other_type}: no faces will be seen; set image_transport to '{other_transport}' "
            f"(e.g. --set perception_node.image_transport={other_transport})"
        )
