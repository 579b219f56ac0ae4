"""QoS of the Instruct action's services, deep enough that goals sent together are never dropped.

An action is three services (goal, result, cancel) plus feedback and status topics. rclpy's default
services QoS keeps the last 10 samples, and DDS silently drops the oldest beyond that:
- server side, the 11th goal request to arrive before the executor takes the first is gone; its
  client never hears back (20 clients at once: 10 answered, 10 waiting forever);
- client side, every client's response reader receives the responses to *all* clients of the
  service (rmw matches them to its own requests only when it takes them), so a client that is slow
  to take loses its own answer once 10 others arrive first (a burst of rejections, of PREEMPTED results).
Both ends therefore use `depth` >= the number of clients that may send at once.
"""

from __future__ import annotations

from rclpy.qos import QoSProfile, qos_profile_services_default

DEFAULT_DEPTH = 100  # the control node's action_queue_depth default; m3 ask uses it too


def services_qos(depth: int) -> QoSProfile:
    """rclpy's services default (reliable, volatile, keep last) with `depth` instead of 10."""
    return QoSProfile(
        history=qos_profile_services_default.history,
        depth=depth,
        reliability=qos_profile_services_default.reliability,
        durability=qos_profile_services_default.durability,
    )


def _services(depth: int) -> dict[str, QoSProfile]:
    profile = services_qos(depth)
    return dict(
        goal_service_qos_profile=profile, result_service_qos_profile=profile, cancel_service_qos_profile=profile
    )


def server_qos(depth: int = DEFAULT_DEPTH) -> dict[str, QoSProfile]:
    """Keyword arguments for rclpy.action.ActionServer."""
    return {**_services(depth), "feedback_pub_qos_profile": QoSProfile(depth=depth)}


def client_qos(depth: int = DEFAULT_DEPTH) -> dict[str, QoSProfile]:
    """Keyword arguments for rclpy.action.ActionClient."""
    return {**_services(depth), "feedback_sub_qos_profile": QoSProfile(depth=depth)}
