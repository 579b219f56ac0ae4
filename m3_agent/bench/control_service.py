"""The service transport for `m3 bench control --memory-transport service`: the memory node's services
over DDS, as `m3 run --memory-transport service` and a control node alone reach memory.

Why a separate module: bench.py measures the loop over a client; this brings up the real MemoryNode
over the bench's memory directory and a RosMemoryClient on a node of the bench, so each search, and
the round's one get_names, is a DDS request with its message conversions. Where the memory node runs
(`--memory-process`):
- `separate` (default): its own process (`m3 run --nodes memory_node --llm none`), as a control node
  on another process or machine reaches it; the two interpreters convert and serve in parallel;
- `shared`: this process, both nodes on one MultiThreadedExecutor spinning in a thread (the loop
  blocks on each call, as in the action's callback), as `m3 run --memory-transport service` runs them:
  the memory node's work, the messages' conversions and the client share one interpreter lock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator

MEMORY_PROCESSES = ("separate", "shared")


@contextlib.contextmanager
def service_client(
    memory_dir: str, embedder, text_settings: dict, process: str = "separate", timeout_s: float = 60.0
) -> Iterator[object]:
    """A RosMemoryClient over a MemoryNode serving memory_dir (see the module docstring for `process`).

    embedder: the bench's TextEmbedder, shared with a node in this process; a node in its own process
    makes its own from text_settings (its text_runtime and text_threads parameters). The directory must
    not be open elsewhere: the bench closes its own Memory first."""
    if process not in MEMORY_PROCESSES:
        raise ValueError(f"memory process must be one of {MEMORY_PROCESSES}, not {process!r}")
    import rclpy
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.context import Context
    from rclpy.node import Node

    from m3_control.ros_memory_client import RosMemoryClient
    from m3_runtime.node_shutdown import spinning

    context = Context()
    rclpy.init(args=[], context=context)
    try:
        with contextlib.ExitStack() as stack:
            nodes, child_log = [], None
            if process == "shared":
                nodes.append(stack.enter_context(_memory_node_here(memory_dir, embedder, context)))
            else:
                child_log = stack.enter_context(_memory_node_process(memory_dir, text_settings, timeout_s))
            client_node = Node("bench_memory_client", context=context)
            client = RosMemoryClient(client_node, "/m3/memory", timeout_s, ReentrantCallbackGroup())
            # spinning: stopped in order, then the nodes destroyed (the memory node closes its store)
            with spinning(*nodes, client_node):
                for service in (client.search_clip_client, client.search_node_client, client.get_names_client):
                    if not service.wait_for_service(timeout_sec=timeout_s):
                        seen = f"; the memory node process's log: {child_log()}" if child_log else ""
                        raise RuntimeError(f"{service.srv_name} did not appear within {timeout_s} s{seen}")
                client.search_clip("warm-up", top_k=1)  # raises when the node could not open the store
                yield client
    finally:
        rclpy.try_shutdown(context=context)


@contextlib.contextmanager
def _memory_node_here(memory_dir: str, embedder, context) -> Iterator[object]:
    """The MemoryNode in this process, brought up (destroyed by `spinning` on leaving)."""
    from rclpy.parameter import Parameter

    from m3_memory.memory_node import MemoryNode
    from m3_runtime.managed_node import bring_up

    overrides = [Parameter("memory_dir", value=memory_dir)]
    node = MemoryNode(embedder=embedder, context=context, parameter_overrides=overrides)
    try:
        bring_up(node)
    except BaseException:
        node.destroy_node()
        raise
    if node.memory is None:
        node.destroy_node()
        raise RuntimeError(f"the memory node could not open {memory_dir}: {node.store_error}")
    yield node


@contextlib.contextmanager
def _memory_node_process(memory_dir: str, text_settings: dict, timeout_s: float) -> Iterator[Callable[[], str]]:
    """`m3 run --nodes memory_node` on memory_dir in a child process (this environment, so its ROS
    domain), stopped with SIGINT, as a user stops it, on leaving; yields a function that reads its
    log's end (for errors)."""
    command = [sys.executable, "-m", "m3_agent.cli", "run", "--nodes", "memory_node", "--llm", "none"]
    for name, value in {"memory_dir": memory_dir, **text_settings}.items():
        command += ["--set", f"memory_node.{name}={value}"]
    with tempfile.TemporaryFile("w+") as log:

        def tail(chars: int = 2000) -> str:
            log.flush()
            log.seek(0)
            return log.read()[-chars:]

        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            yield tail
        finally:
            _stop(child, timeout_s)


def _stop(child: subprocess.Popen, timeout_s: float) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGINT)  # the node closes its store (saving the text index) before exiting
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
