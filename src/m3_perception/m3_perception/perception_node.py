"""ROS 2 adapter of the perception logic (a bare node until the perception issue lands)."""

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

NODE_NAME = "perception_node"


class PerceptionNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__(NODE_NAME, **kwargs)


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    node = PerceptionNode()
    try:
        rclpy.spin(node, MultiThreadedExecutor())
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
