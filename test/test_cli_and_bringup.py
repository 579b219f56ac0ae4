"""The m3 command line, the one-process bring-up and the launch files."""

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_m3(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    return subprocess.run(["m3", *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_help_lists_subcommands():
    result = run_m3("--help")
    assert result.returncode == 0, result.stderr
    commands = ("run", "node", "video2bag", "play", "replay", "make-episode", "demo", "eval", "ask", "judge", "bench")
    for command in commands:
        assert re.search(rf"^\s+{command}\s+\S", result.stdout, re.MULTILINE), f"{command} missing from --help"
    assert "m3-agent-ros" in result.stdout


@pytest.mark.parametrize(
    ("argv", "keep_up", "topic"),
    [
        (["--keep-up", "BAG"], True, "/m3/perception/processed_until"),  # the flag before the bag takes no value
        (["BAG", "--keep-up"], True, "/m3/perception/processed_until"),
        (["BAG", "--keep-up", "--keep-up-topic", "/r2/progress"], True, "/r2/progress"),
        (["BAG"], False, "/m3/perception/processed_until"),
    ],
)  # fmt: skip
def test_play_keep_up_options(argv, keep_up, topic):
    from m3_agent.cli import build_parser

    args = build_parser().parse_args(["play", *argv])
    assert (args.bag, args.keep_up, args.keep_up_topic) == ("BAG", keep_up, topic)


def test_unknown_params_file_is_a_clear_error():
    result = run_m3("run", "--params-file", "/nonexistent/m3.yaml", "--exit-after", "1")
    assert result.returncode == 2
    assert "parameter file not found: /nonexistent/m3.yaml" in result.stderr


def test_run_check_brings_up_all_nodes(tmp_path):
    result = run_m3("run", "--check", "--set", f"memory_node.memory_dir={tmp_path / 'memory'}")
    assert result.returncode == 0, result.stderr
    graph = json.loads(result.stdout)
    assert graph["nodes"] == ["control_node", "memory_node", "perception_node"]
    assert "/m3/memory/search_clip" in graph["services"]["memory_node"]
    assert "/m3/instruct" in graph["actions"]["control_node"]
    assert "/m3/faces" in graph["topics"]["perception_node"]
    assert (tmp_path / "memory" / "memory.sqlite3").exists()  # the override reached the memory node


def test_a_robot_namespace_holds_every_name_and_takes_the_parameters(tmp_path):
    """`--ros-args -r __ns:=/robot_7`: the nodes' topics, services and action move under the robot's
    namespace (they are relative names), and config/m3.yaml and --set still reach the nodes there."""
    memory_dir = tmp_path / "memory"
    namespace = ["--ros-args", "-r", "__ns:=/robot_7"]
    result = run_m3("run", "--check", "--set", f"memory_node.memory_dir={memory_dir}", *namespace)
    assert result.returncode == 0, result.stderr
    graph = json.loads(result.stdout)
    assert graph["nodes"] == ["control_node", "memory_node", "perception_node"]
    assert "/robot_7/m3/memory/search_clip" in graph["services"]["memory_node"]
    assert graph["actions"]["control_node"] == ["/robot_7/m3/instruct"]
    assert {"/robot_7/m3/faces", "/robot_7/m3/voices"} <= set(graph["topics"]["perception_node"])
    assert not any(name.startswith("/m3/") for names in graph["topics"].values() for name in names)
    assert (memory_dir / "memory.sqlite3").exists()  # the --set reached /robot_7/memory_node


def test_bad_override_is_a_clear_error():
    result = run_m3("run", "--set", "memory_dir=/tmp/x", "--exit-after", "1")
    assert result.returncode == 2
    assert "NODE.PARAMETER=VALUE" in result.stderr


def test_config_names_every_node():
    import yaml

    config = yaml.safe_load((ROOT / "config" / "m3.yaml").read_text())
    assert set(config) == {"perception_node", "memory_node", "control_node"}
    assert all("ros__parameters" in section for section in config.values())


@pytest.mark.parametrize("launch_file", sorted((ROOT / "launch").glob("*.launch.py")), ids=lambda p: p.name)
def test_launch_files(launch_file):
    compile(launch_file.read_text(), str(launch_file), "exec")  # valid Python everywhere
    if importlib.util.find_spec("launch_ros") is None:
        pytest.skip("launch_ros is not installed here (standard ROS 2 installs only)")
    spec = importlib.util.spec_from_file_location("launch_under_test", launch_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.generate_launch_description().entities


def test_env_sh_puts_m3_on_path():
    # under `set -euo pipefail`, as bootstrap.sh sources it: colcon's scripts read unset variables
    script = f"set -euo pipefail; source {ROOT / 'env.sh'}; command -v m3 perception_node memory_node control_node"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert [Path(p).name for p in result.stdout.split()] == ["m3", "perception_node", "memory_node", "control_node"]


def test_colcon_discovers_all_six_packages():
    result = subprocess.run(
        ["colcon", "list", "--names-only", "--base-paths", ".", "src"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == [
        "m3_agent",
        "m3_control",
        "m3_interfaces",
        "m3_memory",
        "m3_perception",
        "m3_runtime",
    ]


def test_config_holds_every_parameter_with_its_default():
    """config/m3.yaml documents every node parameter with the node's own default (README: Parameters)."""
    import yaml

    from m3_control.control_node import PARAMETERS as CONTROL
    from m3_memory.node_parameters import PARAMETERS as MEMORY
    from m3_perception.perception_node import PARAMETERS as PERCEPTION

    config = yaml.safe_load((ROOT / "config" / "m3.yaml").read_text())
    for node, table in (("perception_node", PERCEPTION), ("memory_node", MEMORY), ("control_node", CONTROL)):
        values = config[node]["ros__parameters"]
        extra, missing = set(values) - set(table), set(table) - set(values)
        assert not extra and not missing, f"{node}: only in m3.yaml {extra}, missing there {missing}"
        differ = {k: (values[k], table[k][0]) for k in table if values[k] != table[k][0]}
        assert not differ, f"{node}: m3.yaml value != node default: {differ}"


class _TwoOfOneName:
    """A probe's graph view where another process's node shares our memory node's name: one of the two
    (ours, its endpoints not yet discovered, or a stopped one within its lease) shows no endpoint."""

    def __init__(self):
        self.calls = 0

    def get_node_names_and_namespaces(self):
        return [("memory_node", "/"), ("memory_node", "/")]

    def get_publisher_names_and_types_by_node(self, name, namespace):
        self.calls += 1
        return [("/rosout", ["rcl_interfaces/msg/Log"]), ("/m3/memory_events", ["x"])] if self.calls % 2 else []

    def get_service_names_and_types_by_node(self, name, namespace):
        return [("/m3/search_node", ["m3_interfaces/srv/SearchNode"])] if self.calls % 2 else []


def test_graph_snapshot_names_a_node_listed_twice_and_keeps_its_endpoints(monkeypatch):
    import rclpy.action

    from m3_agent.bringup import snapshot_graph

    monkeypatch.setattr(rclpy.action, "get_action_server_names_and_types_by_node", lambda *_: [])
    snapshot = snapshot_graph(_TwoOfOneName(), ("memory_node",), settle_s=0.5)
    assert snapshot.duplicate_nodes == ["memory_node"]
    assert snapshot.topics["memory_node"] == ["/m3/memory_events", "/rosout"]
    assert snapshot.services["memory_node"] == ["/m3/search_node"]


class _SlowEndpoints:
    """A probe whose graph shows the node's /rosout at once but its own topic only after `after` queries."""

    def __init__(self, after: int):
        self.calls, self.after = 0, after

    def get_node_names_and_namespaces(self):
        return [("memory_node", "/")]

    def get_publisher_names_and_types_by_node(self, name, namespace):
        self.calls += 1
        late = [("/humans/persons/known", ["hri_msgs/msg/IdsList"])] if self.calls > self.after else []
        return [("/rosout", ["rcl_interfaces/msg/Log"]), *late]

    def get_service_names_and_types_by_node(self, name, namespace):
        return []


def test_graph_snapshot_waits_for_the_topics_our_nodes_have_and_names_those_never_shown(monkeypatch):
    import rclpy.action

    from m3_agent.bringup import snapshot_graph

    monkeypatch.setattr(rclpy.action, "get_action_server_names_and_types_by_node", lambda *_: [])
    ours = {"memory_node": {"/rosout", "/humans/persons/known"}}
    late = snapshot_graph(_SlowEndpoints(after=5), ("memory_node",), settle_s=10.0, expected_topics=ours)
    assert late.topics["memory_node"] == ["/humans/persons/known", "/rosout"] and late.undiscovered == {}
    never = snapshot_graph(_SlowEndpoints(after=10**9), ("memory_node",), settle_s=0.5, expected_topics=ours)
    assert never.topics["memory_node"] == ["/rosout"]
    assert never.undiscovered == {"memory_node": ["/humans/persons/known"]}
