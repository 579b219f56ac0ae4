"""Launch the m3-agent-ros nodes with config/m3.yaml on a standard ROS 2 Jazzy install.

ros2 launch m3_agent m3.launch.py
ros2 launch m3_agent m3.launch.py nodes:=memory,control params_file:=/path/to/m3.yaml

The nodes are lifecycle nodes. Each starts with autostart false (it waits in unconfigured) and this
file drives it, as a lifecycle manager would: configure when its process has started, activate once
it reaches inactive. A node that fails to configure stays unconfigured and says why in its log; the
others carry on. `autostart:=true` lets each node bring itself up instead (what its command does).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, EmitEvent, RegisterEventHandler
from launch.conditions import IfCondition, UnlessCondition
from launch.event_handlers import OnProcessStart
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from launch_ros.parameter_descriptions import ParameterValue
from lifecycle_msgs.msg import Transition

from launch import LaunchDescription

NODES = (
    ("perception", "m3_perception", "perception_node"),
    ("memory", "m3_memory", "memory_node"),
    ("control", "m3_control", "control_node"),
)


def transition(node: LifecycleNode, transition_id: int) -> EmitEvent:
    return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node), transition_id=transition_id))


def managed(short: str, package: str, executable: str, nodes, params_file, autostart) -> list:
    """One lifecycle node, configured once its process runs and activated once it is inactive."""
    node = LifecycleNode(
        package=package,
        executable=executable,
        name=executable,
        namespace="",
        parameters=[params_file, {"autostart": ParameterValue(autostart, value_type=bool)}],
        output="screen",
        condition=IfCondition(PythonExpression(["'", short, "' in '", nodes, "'.split(',')"])),
    )
    driven = UnlessCondition(autostart)
    configure = RegisterEventHandler(
        OnProcessStart(target_action=node, on_start=[transition(node, Transition.TRANSITION_CONFIGURE)]),
        condition=driven,
    )
    activate = RegisterEventHandler(
        OnStateTransition(
            target_lifecycle_node=node,
            start_state="configuring",
            goal_state="inactive",
            entities=[transition(node, Transition.TRANSITION_ACTIVATE)],
        ),
        condition=driven,
    )
    return [node, configure, activate]


def generate_launch_description() -> LaunchDescription:
    default_params = os.path.join(get_package_share_directory("m3_agent"), "config", "m3.yaml")
    nodes = LaunchConfiguration("nodes")
    params_file = LaunchConfiguration("params_file")
    autostart = LaunchConfiguration("autostart")
    return LaunchDescription(
        [
            DeclareLaunchArgument("params_file", default_value=default_params, description="parameter YAML"),
            DeclareLaunchArgument(
                "nodes",
                default_value="perception,memory,control",
                description="comma-separated nodes to start",
            ),
            DeclareLaunchArgument(
                "autostart",
                default_value="false",
                description="false: this file configures and activates each node; true: each node does itself",
            ),
            *(
                entity
                for short, package, executable in NODES
                for entity in managed(short, package, executable, nodes, params_file, autostart)
            ),
        ]
    )
