"""A goal cut by a stop is answered before the action server goes, even when the machine is slow.

The defect (a CI run of test/test_run_sigterm_goal.py): the control node's quiesce saw the goal end and
returned, so the stop stopped spinning; but rclpy sends a goal's result from a task it puts on the
executor only after the execute callback has returned. A thread that was slow to get there left that
task unrun, the server was destroyed, and `m3 ask` never got its answer. Here the slow thread is made
certain (a pause after the goal's bookkeeping ends), and the client, in a context of its own, must
still get the result over real DDS. Run with a domain of its own (ROS_DOMAIN_ID, LOCALHOST discovery).
"""

from __future__ import annotations

import time

import rclpy
from rclpy.action import ActionClient
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from m3_control.control_node import ControlNode
from m3_interfaces.action import Instruct
from m3_runtime.managed_node import bring_up
from m3_runtime.node_shutdown import spinning

SLOW_RETURN_S = 0.3  # between the goal's end in the node and rclpy's result: a loaded machine's delay


def spin_until(executor: SingleThreadedExecutor, predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    return predicate()


def test_a_goal_cut_by_the_stop_is_answered_though_its_thread_is_slow():
    server_context, client_context = Context(), Context()
    rclpy.init(context=server_context)
    rclpy.init(context=client_context)
    try:
        control = ControlNode(
            context=server_context,
            parameter_overrides=[
                Parameter("memory_prefix", value="nowhere"),  # the goal waits for memory: it runs at the stop
                Parameter("memory_timeout_s", value=4.0),
            ],
        )
        bring_up(control)
        finished = control._finished

        def slow_finished(goal_handle) -> None:
            finished(goal_handle)
            time.sleep(SLOW_RETURN_S)

        control._finished = slow_finished
        client_node = Node("stop_answers_client", context=client_context)
        client_executor = SingleThreadedExecutor(context=client_context)
        client_executor.add_node(client_node)
        client = ActionClient(client_node, Instruct, "m3/instruct")
        with spinning(control):
            assert client.wait_for_server(timeout_sec=30.0), "the control node did not come up"
            sent = client.send_goal_async(Instruct.Goal(instruction="Where are the keys?", max_rounds=3))
            assert spin_until(client_executor, sent.done, 30.0) and sent.result().accepted
            result = sent.result().get_result_async()
            spin_until(client_executor, lambda: False, 0.5)  # the result request reaches the server
        # leaving `spinning` stopped the node: the goal was cut, and the server is gone
        assert spin_until(client_executor, result.done, 10.0), "the client never got the goal's result"
        answer = result.result().result
        assert answer.error_code in (Instruct.Result.PREEMPTED, Instruct.Result.MEMORY_UNAVAILABLE), answer
    finally:
        rclpy.try_shutdown(context=client_context)
        rclpy.try_shutdown(context=server_context)
