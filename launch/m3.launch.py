"""Launch the m3-agent-ros nodes with config/m3.yaml on a standard ROS 2 Jazzy install.

ros2 launch m3_agent m3.launch.py
ros2 launch m3_agent m3.launch.py nodes:=memory,control params_file:=/path/to/m3.yaml
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node

from launch import LaunchDescription

NODES = (
    ("perception", "m3_perception", "perception_node"),
    ("memory", "m3_memory", "memory_node"),
    ("control", "m3_control", "control_node"),
)


def generate_launch_description() -> LaunchDescription:
    default_params = os.path.join(get_package_share_directory("m3_agent"), "config", "m3.yaml")
    nodes = LaunchConfiguration("nodes")
    params_file = LaunchConfiguration("params_file")
    return LaunchDescription(
        [
            DeclareLaunchArgument("params_file", default_value=default_params, description="parameter YAML"),
            DeclareLaunchArgument(
                "nodes",
                default_value="perception,memory,control",
                description="comma-separated nodes to start",
            ),
            *(
                Node(
                    package=package,
                    executable=executable,
                    name=executable,
                    parameters=[params_file],
                    output="screen",
                    condition=IfCondition(PythonExpression(["'", short, "' in '", nodes, "'.split(',')"])),
                )
                for short, package, executable in NODES
            ),
        ]
    )
