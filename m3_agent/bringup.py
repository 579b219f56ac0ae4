"""Run the perception, memory and control nodes in one process, like a composed container.

launch/launch_ros are not available from PyPI, so this is how the suite starts outside a
standard ROS 2 install; the launch files in launch/ start the same nodes with the same YAML.

Memory transport: when the memory node and the control node run in this process, the control
loop searches the memory node's Memory object directly (m3_control.direct_memory_client: same
results and errors as the services, without a DDS round trip per search); `memory_transport
"service"` makes it call the memory services as a control node in another process does. The
memory services are served either way, for every other client.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from m3_runtime.node_shutdown import spin_until_stopped, stop_executor, stop_signals_deferred, stop_signals_held

NODE_NAMES = ("perception_node", "memory_node", "control_node")
MEMORY_TRANSPORTS = ("direct", "service")


def default_params_file() -> str:
    """The installed config/m3.yaml (falls back to the source tree when run uninstalled)."""
    try:
        from ament_index_python.packages import get_package_share_directory

        path = os.path.join(get_package_share_directory("m3_agent"), "config", "m3.yaml")
    except Exception:  # noqa: BLE001 - package not installed: use the source checkout
        path = os.path.join(os.path.dirname(__file__), os.pardir, "config", "m3.yaml")
    return os.path.abspath(path)


def memory_transport_for(selected: tuple[str, ...], requested: str | None = None) -> str | None:
    """How the control node reaches memory: "direct" or "service"; None when no control node runs.

    requested None: direct when the memory node runs in this process too, else service. "direct"
    without the memory node in this process is an error (there is no Memory object to call)."""
    if requested is not None and requested not in MEMORY_TRANSPORTS:
        raise ValueError(f"memory transport {requested!r}: choose one of {list(MEMORY_TRANSPORTS)}")
    if "control_node" not in selected:
        return None
    if requested == "direct" and "memory_node" not in selected:
        raise ValueError("memory transport 'direct' needs memory_node in this process too (add it, or use 'service')")
    return requested or ("direct" if "memory_node" in selected else "service")


def create_nodes(selected: tuple[str, ...] = NODE_NAMES, memory_transport: str | None = None) -> list[Node]:
    """Instantiate the selected (lifecycle) nodes in the order given and bring each to active
    (configure, then activate; a node whose autostart parameter is false stays unconfigured); imports
    are lazy so one node can run without the others' models. The control node gets a
    DirectMemoryClient over the memory node's Memory when the transport (memory_transport_for) is
    direct. A node that cannot be configured raises ConfigureFailed naming it and why."""
    unknown = set(selected) - set(NODE_NAMES)
    if unknown:
        raise ValueError(f"unknown node(s) {sorted(unknown)}; choose from {list(NODE_NAMES)}")
    transport = memory_transport_for(selected, memory_transport)
    from m3_runtime.parameter_checks import share_names

    for name in selected:  # a process-wide --ros-args -p reaches every node here: another's name is no typo
        share_names(parameter_table(name))
    factories: dict[str, Callable[[], Node]] = {}
    if "perception_node" in selected:
        from m3_perception.perception_node import PerceptionNode

        factories["perception_node"] = PerceptionNode
    if "memory_node" in selected:
        from m3_memory.memory_node import MemoryNode

        factories["memory_node"] = MemoryNode
    created: dict[str, Node] = {}
    try:
        for name in NODE_NAMES:  # memory before control
            if name in factories:
                created[name] = factories[name]()
        if "control_node" in selected:
            from m3_control.control_node import ControlNode

            if transport == "direct":
                from m3_control.direct_memory_client import DirectMemoryClient

                created["control_node"] = ControlNode(memory_client=DirectMemoryClient.of_node(created["memory_node"]))
            else:
                created["control_node"] = ControlNode()
        for name, node in created.items():
            activate(name, node)  # unless its autostart parameter leaves it to a lifecycle manager
    except BaseException:
        for node in created.values():
            node.destroy_node()
        raise
    return [created[name] for name in selected]


def activate(name: str, node) -> None:
    """configure + activate one node (autostart true); why it failed, named, when it did not get there."""
    from m3_runtime.managed_node import ConfigureFailed, autostarts, bring_up

    if not autostarts(node):
        return
    try:
        bring_up(node)
    except ConfigureFailed:
        raise
    except Exception as error:
        raise ConfigureFailed(f"{name} cannot be configured: {error}") from error


def parse_overrides(items: list[str]) -> dict[str, dict[str, object]]:
    """['memory_node.memory_dir=/data/m3'] -> {'memory_node': {'memory_dir': '/data/m3'}}; values are YAML."""
    import yaml

    overrides: dict[str, dict[str, object]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        node, dot, name = key.partition(".")
        if not sep or not dot or node not in NODE_NAMES or not name:
            raise ValueError(f"expected NODE.PARAMETER=VALUE with NODE one of {list(NODE_NAMES)}, got {item!r}")
        overrides.setdefault(node, {})[name] = yaml.safe_load(value) if value else ""
    return overrides


def parameter_table(node: str) -> dict:
    """A node's PARAMETERS table: name -> (default, descriptor)."""
    if node == "perception_node":
        from m3_perception.node_parameters import PARAMETERS
    elif node == "memory_node":
        from m3_memory.node_parameters import PARAMETERS
    else:
        from m3_control.control_node import PARAMETERS
    return PARAMETERS


def load_parameters(params_file: str, overrides: dict[str, dict[str, object]] | None) -> dict:
    """params_file's node sections with the overrides (--set) on top."""
    import yaml

    with open(params_file, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{params_file}: not a ROS parameter file (a mapping of node names)")
    for node, values in (overrides or {}).items():
        section = data.setdefault(node, {}).setdefault("ros__parameters", {})
        section.update(values)
    return data


def check_parameters(params_file: str | None, overrides: dict[str, dict[str, object]] | None) -> None:
    """Refuse, before anything starts or is created, a params file or --set naming a parameter a node does
    not have (with the closest one it has), a value of the wrong type or out of range: "<node>: cannot
    configure: <why>" (ParameterError, a ValueError: exit 2). An integer for a float is fine."""
    from m3_runtime.parameter_checks import ParameterError, section_problems

    params_file = params_file or default_params_file()
    if not os.path.isfile(params_file):
        raise FileNotFoundError(f"parameter file not found: {params_file}")
    for key, section in load_parameters(params_file, overrides).items():
        node = str(key).rsplit("/", 1)[-1]
        if node not in NODE_NAMES or not isinstance(section, dict):
            continue  # another program's section, or the "/**" one every node reads
        values = section.get("ros__parameters") or {}
        if not isinstance(values, dict):
            raise ParameterError(f"{node}: cannot configure: ros__parameters in {params_file} is not a mapping")
        problems = section_problems(values, parameter_table(node))
        if problems:
            raise ParameterError(f"{node}: cannot configure: {'; '.join(problems)}")


def parameters_file(params_file: str, overrides: dict[str, dict[str, object]] | None) -> str:
    """One parameter YAML for rclpy: params_file with the overrides on top, and each section keyed by a
    bare node name ("memory_node") re-keyed "/**/memory_node", so it also reaches that node under a
    robot's namespace (`--ros-args -r __ns:=/robot_1`); sections keyed by a full name stay as they are."""
    import yaml

    data = load_parameters(params_file, overrides)
    keyed = {(key if key.startswith("/") else f"/**/{key}"): value for key, value in data.items()}
    handle = tempfile.NamedTemporaryFile("w", prefix="m3_params_", suffix=".yaml", delete=False)
    with handle:
        yaml.safe_dump(keyed, handle)
    return handle.name


@dataclass
class GraphSnapshot:
    """What another participant sees of the running suite over DDS."""

    nodes: list[str]
    topics: dict[str, list[str]]
    services: dict[str, list[str]]
    actions: dict[str, list[str]]
    duplicate_nodes: list[str] = field(default_factory=list)  # names another process also uses
    undiscovered: dict[str, list[str]] = field(default_factory=dict)  # topics a node has that DDS did not show

    def as_dict(self) -> dict:
        return {
            "nodes": self.nodes,
            "topics": self.topics,
            "services": self.services,
            "actions": self.actions,
            "duplicate_nodes": self.duplicate_nodes,
            "undiscovered": self.undiscovered,
        }


def snapshot_graph(
    probe: Node,
    node_names: tuple[str, ...],
    settle_s: float = 30.0,
    expected_topics: dict[str, set[str]] | None = None,
) -> GraphSnapshot:
    """Discover the nodes from a probe node, waiting up to settle_s for discovery to finish.

    A node's name can be discovered well before its endpoints (a loaded machine: CI saw the memory node with
    no topic at all). expected_topics, what nodes of this process publish (their Node.publishers): the wait
    goes on until the graph shows every one of them, and those it never shows are `undiscovered`. Without
    it, every rclpy node publishes /rosout: a node counts as seen once it shows a publisher.
    Another process's node of the same name (one just stopped, still within its DDS lease) is listed beside
    ours: the wait goes on while a name is listed twice, and one that stays is named in `duplicate_nodes`
    (the graph API looks endpoints up by name, so they may then be the other node's).
    """
    from rclpy.action import get_action_server_names_and_types_by_node

    expected = expected_topics or {}

    def missing(name: str, namespace: str) -> set[str]:
        shown = {t for t, _ in probe.get_publisher_names_and_types_by_node(name, namespace)}
        return expected.get(name, set()) - shown if shown else {"(any topic)"}

    deadline = time.monotonic() + settle_s
    last, stable_since = None, time.monotonic()
    while time.monotonic() < deadline:  # until every node is seen and its names stop arriving for 1 s
        found = sorted(
            (name, sorted(missing(name, namespace)))
            for name, namespace in probe.get_node_names_and_namespaces()
            if name in node_names
        )
        seen = {name for name, absent in found if not absent}
        unique = len(found) == len({name for name, _ in found})
        if found != last:
            last, stable_since = found, time.monotonic()
        elif seen == set(node_names) and unique and time.monotonic() - stable_since >= 1.0:
            break
        time.sleep(0.1)
    topics: dict[str, set[str]] = {}
    services: dict[str, set[str]] = {}
    actions: dict[str, set[str]] = {}
    listed: Counter[str] = Counter()
    for name, namespace in probe.get_node_names_and_namespaces():
        if name not in node_names:
            continue
        listed[name] += 1
        publishers = probe.get_publisher_names_and_types_by_node(name, namespace)
        topics.setdefault(name, set()).update(t for t, _ in publishers)
        services.setdefault(name, set()).update(
            s
            for s, _ in probe.get_service_names_and_types_by_node(name, namespace)
            if not s.rsplit("/", 1)[-1].endswith(("_parameters", "_parameter_types", "_parameter"))
            and "/_action/" not in s
        )
        actions.setdefault(name, set()).update(
            a for a, _ in get_action_server_names_and_types_by_node(probe, name, namespace)
        )

    def listing(found: dict[str, set[str]]) -> dict[str, list[str]]:
        return {name: sorted(names) for name, names in found.items()}

    duplicates = sorted(name for name, count in listed.items() if count > 1)
    unshown = {name: wanted - topics.get(name, set()) for name, wanted in expected.items()}
    undiscovered = {name: sorted(absent) for name, absent in unshown.items() if absent}
    return GraphSnapshot(sorted(topics), listing(topics), listing(services), listing(actions), duplicates, undiscovered)


@contextlib.contextmanager
def running_nodes(
    params_file: str | None = None,
    selected: tuple[str, ...] = NODE_NAMES,
    overrides: dict[str, dict[str, object]] | None = None,
    ros_args: list[str] | None = None,
    memory_transport: str | None = None,
) -> Iterator[tuple[list[Node], MultiThreadedExecutor]]:
    """rclpy initialised with the parameter files, the selected nodes created and added to one
    MultiThreadedExecutor (not yet spinning); everything torn down on exit. memory_transport: see
    memory_transport_for (None: direct when memory and control both run here).

    Stopping is ordered as in managed_node.run_node: rclpy's signal handlers are not installed, so the
    context stays up after Ctrl-C or SIGTERM (a KeyboardInterrupt while the nodes start; a flag once
    `run` spins them, spin_until_stopped); on exit running goals end and are answered (stop_executor),
    then the nodes are destroyed, then the context goes. Call it from the main thread."""
    params_file = params_file or default_params_file()
    if not os.path.isfile(params_file):
        raise FileNotFoundError(f"parameter file not found: {params_file}")
    check_parameters(params_file, overrides)  # before rclpy, a node or a store is made
    merged_file = parameters_file(params_file, overrides)
    try:  # no rclpy signal handlers: they would shut the context down under a running goal (run_node's why)
        args = ["m3", "--ros-args", "--params-file", merged_file, *(ros_args or [])]
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    finally:
        os.unlink(merged_file)  # rcl has read it
    nodes: list[Node] = []
    executor: MultiThreadedExecutor | None = None
    try:
        with stop_signals_deferred():  # a signal inside its __init__ leaves a half-built executor
            # More threads than the default: a running goal holds one while its memory replies need another.
            executor = MultiThreadedExecutor(num_threads=max(4, os.cpu_count() or 1))
        nodes = create_nodes(selected, memory_transport)
        for node in nodes:
            executor.add_node(node)
        yield nodes, executor
    finally:
        with stop_signals_held():  # a second signal does not cut the ordered stop short
            if executor is not None:
                stop_executor(executor, nodes)  # no callback runs when the nodes go: rclpy's shutdown does not wait
            for node in nodes:
                node.destroy_node()
            rclpy.try_shutdown()


def run(
    params_file: str | None = None,
    selected: tuple[str, ...] = NODE_NAMES,
    exit_after_s: float | None = None,
    on_ready: Callable[[list[Node]], None] | None = None,
    ros_args: list[str] | None = None,
    stop: threading.Event | None = None,
    overrides: dict[str, dict[str, object]] | None = None,
    memory_transport: str | None = None,
) -> int:
    """Spin the selected nodes in one MultiThreadedExecutor until Ctrl-C, exit_after_s or stop."""
    with running_nodes(params_file, selected, overrides, ros_args, memory_transport) as (nodes, executor):
        try:
            if on_ready is not None:
                on_ready(nodes)
            end = None if exit_after_s is None else time.monotonic() + exit_after_s
            stop = stop or threading.Event()
            spin_until_stopped(executor, lambda: stop.is_set() or (end is not None and time.monotonic() >= end))
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
    return 0
