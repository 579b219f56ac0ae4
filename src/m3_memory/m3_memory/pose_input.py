"""The memory node's pose input: the robot's pose topic into a PoseTrack (m3_memory.place.poses), so each
clip keeps the robot's path and each memory the place it happened. A thin ROS adapter: the message types
are imported only when a pose topic is set (geometry_msgs, nav_msgs)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from m3_memory.place.poses import ClipsAwaitingPoses, PoseSample, PoseTrack, yaw_from_quaternion

NS = 1_000_000_000
POSE_QUEUE = 200  # poses waiting for the node: 4 s of a 50 Hz odometry topic


# pose_type -> (ROS type name, the geometry_msgs/Pose inside such a message: rclpy's or a recording's)
POSE_OF: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "pose_stamped": ("geometry_msgs/msg/PoseStamped", lambda msg: msg.pose),
    "pose_with_covariance_stamped": ("geometry_msgs/msg/PoseWithCovarianceStamped", lambda msg: msg.pose.pose),
    "odometry": ("nav_msgs/msg/Odometry", lambda msg: msg.pose.pose),
}
POSE_TYPES = tuple(POSE_OF)


def _types() -> dict[str, tuple[type, Callable[[Any], Any]]]:
    """pose_type -> (message class, the geometry_msgs/Pose inside a message)."""
    from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped
    from nav_msgs.msg import Odometry

    classes = {"pose_stamped": PoseStamped, "pose_with_covariance_stamped": PoseWithCovarianceStamped}
    classes["odometry"] = Odometry
    return {name: (classes[name], pose_of) for name, (_, pose_of) in POSE_OF.items()}


def check_pose_type(pose_type: str) -> None:
    """ValueError naming the accepted values (a bad pose_type fails configure)."""
    if pose_type not in POSE_TYPES:
        raise ValueError(f"pose_type must be one of {', '.join(POSE_TYPES)}, got {pose_type!r}")


def pose_sample(msg: Any, pose_of: Callable[[Any], Any]) -> PoseSample:
    """A pose message as a PoseSample on the stream clock (its header stamp); ValueError when it has no
    usable position or orientation."""
    pose = pose_of(msg)
    x, y = float(pose.position.x), float(pose.position.y)
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"position ({x}, {y}) is not finite")
    q = pose.orientation
    yaw = yaw_from_quaternion(q.x, q.y, q.z, q.w)
    stamp = msg.header.stamp
    return PoseSample(int(stamp.sec) * NS + int(stamp.nanosec), x, y, yaw, msg.header.frame_id)


class PoseInput:
    """Subscribes the node's pose topic and keeps the track; counts and warns about what it drops."""

    def __init__(self, node, topic: str, pose_type: str, frame_id: str, wait_s: float) -> None:
        check_pose_type(pose_type)
        self.node, self.topic, self.pose_type = node, topic, pose_type
        self.track = PoseTrack(frame_id)
        self.awaiting = ClipsAwaitingPoses(int(wait_s * 1e9))
        self.received = self.dropped = 0

    def subscribe(self, callback_group=None):
        """The subscription (the node owns it: ManagedNode.live): best effort, so it matches reliable and
        best-effort publishers alike (sensor data QoS), with a queue deep enough for a burst of poses."""
        msg_type, pose_of = _types()[self.pose_type]
        qos = QoSProfile(
            reliability=ReliabilityPolicy.BEST_EFFORT, durability=DurabilityPolicy.VOLATILE,
            history=HistoryPolicy.KEEP_LAST, depth=POSE_QUEUE,
        )  # fmt: skip
        return self.node.create_subscription(
            msg_type, self.topic, lambda msg: self._on_pose(msg, pose_of), qos, callback_group=callback_group
        )

    def _on_pose(self, msg, pose_of) -> None:
        self.received += 1
        try:
            sample = pose_sample(msg, pose_of)
        except (ValueError, AttributeError) as error:
            self._drop(f"unusable pose: {error}")
            return
        if sample.frame_id != self.track.frame_id:
            self._drop(f"pose in frame {sample.frame_id!r}, not pose_frame_id {self.track.frame_id!r}")
            return
        self.track.add(sample)  # False for a repeated or older stamp, or one too close to keep: not an error

    def _drop(self, why: str) -> None:
        self.dropped += 1
        self.node.get_logger().warning(
            f"{self.topic}: dropped a pose ({self.dropped} of {self.received} so far): {why}",
            throttle_duration_sec=5.0,
        )

    def with_paths(self, closed: list, now_ns: int, everything: bool = False) -> list:
        """Hold the newly closed clips; return those whose poses have come (or whose wait is over, or all
        when `everything`), each with the robot's path through its window."""
        self.awaiting.hold(closed, now_ns)
        latest = self.track.latest
        ready = self.awaiting.release(latest.stamp_ns if latest else None, now_ns, everything)
        for clip in ready:
            clip.path = self.track.between(clip.start_ns, clip.end_ns)
        return ready
