"""The managed (lifecycle) node shared by the perception, memory and control nodes, as in nav2.

A node fills in three hooks: configure() reads parameters, loads models or opens stores and creates
its (lifecycle) publishers; go_live() creates its inputs - subscriptions, services, timers, action
servers - through live(); release() gives back what configure() took. The transitions map onto them:
  configure  -> configure()                 activate -> go_live(), publishers enabled
  deactivate -> quiesce(), inputs destroyed  cleanup  -> release(), publishers destroyed
  shutdown   -> inputs destroyed, release()  destroy_node() -> the same, whatever the state
so an inactive node takes no input at all. rclpy turns an exception raised in a transition callback
into ERROR without a word; here a configuration error (a bad value, a missing model file, an endpoint
that cannot be reached) is FAILURE with one log line, and the exception is kept in configure_error for
bring_up() - what `m3 run`, the node commands and tests use - to raise.
"""

from __future__ import annotations

import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecyclePublisher, LifecycleState, TransitionCallbackReturn
from rclpy.service import Service
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import Subscription
from rclpy.timer import Timer

from m3_runtime.node_shutdown import (
    StopSignals,
    spin_until_stopped,
    stop_executor,
    stop_requested,
    stop_signals_deferred,
    stop_signals_held,
)
from m3_runtime.parameter_checks import raise_parameter_problems

SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE
ERROR = TransitionCallbackReturn.ERROR
# What a bad configuration raises: a bad parameter value, a model file or package that is not there,
# an endpoint that cannot be reached (OSError covers FileNotFoundError).
CONFIGURE_ERRORS = (ValueError, OSError, ImportError, RuntimeError)
SPIN_POLL_S = 0.1  # how often run_node's spin looks at Ctrl-C and SIGTERM (rclpy's own handlers are off)
# Every node's `autostart` parameter (in each node's PARAMETERS table, hence config/m3.yaml).
AUTOSTART = (
    True,
    ParameterDescriptor(
        description="configure and activate at start (node command, m3 run); false: wait for a lifecycle manager",
        read_only=True,
    ),
)


class ConfigureFailed(RuntimeError):
    """A node did not reach active; the message says which and why."""


class ManagedNode(LifecycleNode):
    """A lifecycle node built from configure / go_live / release hooks (module docstring)."""

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.configure_error: Exception | None = None
        self.active = False
        self._configured = False
        self._inputs: list[Any] = []
        self._publishers_made: list[LifecyclePublisher] = []

    # -- hooks ---------------------------------------------------------------------------------
    def configure(self) -> None:
        """Read parameters, load models, create publishers (lifecycle_publisher); raise when misconfigured."""

    def go_live(self) -> None:
        """Create the inputs through live(): subscriptions, services, timers, action servers."""

    def quiesce(self) -> None:
        """Let work in flight end before the inputs go (the control node's running goals)."""

    def release(self) -> None:
        """Give back what configure() took; also called after a configure() that failed half-way."""

    def lifecycle_publisher(self, *args: Any, **kwargs: Any) -> LifecyclePublisher:
        """A publisher that publishes only while the node is active; destroyed on cleanup."""
        publisher = self.create_lifecycle_publisher(*args, **kwargs)
        self._publishers_made.append(publisher)
        return publisher

    def live(self, entity: Any) -> Any:
        """Register an input made in go_live(), destroyed on deactivate."""
        self._inputs.append(entity)
        return entity

    # -- transitions -----------------------------------------------------------------------------
    def _guarded(self, what: str, step: Callable[[], None], on_failure: Callable[[], None]) -> TransitionCallbackReturn:
        """Run a transition's step; a failure is logged (rclpy would swallow it), undone and reported."""
        try:
            step()
        except CONFIGURE_ERRORS as error:
            self.configure_error = error
            self._failed(what, f"cannot {what}: {error}")
            on_failure()
            return FAILURE
        except Exception as error:  # noqa: BLE001 - rclpy hides the exception: log it before ERROR
            self.configure_error = error
            self._failed(what, f"{what} failed: {traceback.format_exc()}")
            on_failure()
            return ERROR
        return SUCCESS

    def _failed(self, what: str, message: str) -> None:
        """An error line, unless the process is stopping: then the signal cut the step short (a library
        turns the interrupt into an error of its own), which is no fault to report."""
        if stopping := stop_requested():
            self.get_logger().info(f"{what} cut short by {stopping.upper()}: {message.splitlines()[0]}")
        else:
            self.get_logger().error(message)

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.configure_error = None
        self._configured = True
        result = self._guarded("configure", self._configure_checked, self._release)
        return super().on_configure(state) if result == SUCCESS else result

    def _configure_checked(self) -> None:
        """A bad parameter found at declaration (parameter_checks.declare_checked) fails configure first."""
        raise_parameter_problems(self)
        self.configure()

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = self._guarded("activate", self.go_live, self._stop_inputs)
        if result != SUCCESS:
            return result
        self.active = True
        self.get_logger().info("active")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        self.get_logger().info("inactive: inputs stopped")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        self._release()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        self._release()
        return super().on_error(state)

    def destroy_node(self) -> None:
        """Stop inputs and release (stores flushed and closed, workers joined) in any state, then destroy."""
        try:
            self._stop_inputs()
            self._release()
        finally:
            super().destroy_node()

    def _stop_inputs(self) -> None:
        self.active = False
        if self._inputs:
            self.quiesce()
        while self._inputs:
            entity = self._inputs.pop()
            if isinstance(entity, Subscription):
                self.destroy_subscription(entity)
            elif isinstance(entity, Service):
                self.destroy_service(entity)
            elif isinstance(entity, Timer):
                self.destroy_timer(entity)
            else:
                entity.destroy()  # an action server

    def _release(self) -> None:
        if not self._configured:
            return
        self._configured = False
        try:
            self.release()
        finally:
            while self._publishers_made:
                self.destroy_lifecycle_publisher(self._publishers_made.pop())


def autostarts(node: ManagedNode) -> bool:
    """Whether the node brings itself to active (parameter autostart) or waits for a lifecycle manager."""
    return bool(node.get_parameter("autostart").value)


def bring_up(node: ManagedNode, before_activate: Callable[[], None] = lambda: None) -> ManagedNode:
    """configure then activate, as `m3 run` and the launch file do; raises why when it does not get there.
    before_activate: run between the two (run_node's StopSignals.check: a stop during configure ends it there)."""
    if node.trigger_configure() != SUCCESS:
        if node.configure_error is not None:
            raise node.configure_error
        raise ConfigureFailed(f"{node.get_name()}: configure failed")
    before_activate()
    # Activation only creates publishers, services and servers (milliseconds), whose constructors an
    # interrupt would leave half-built: an ActionServer's logger printed an AttributeError from __del__
    # (1 of 200 stops of the SIGTERM stress test). The stop is honoured once it is active.
    with stop_signals_deferred():
        activated = node.trigger_activate()
    if activated != SUCCESS:
        raise ConfigureFailed(f"{node.get_name()}: activate failed: {node.configure_error}")
    return node


def stop_on_sigterm() -> None:
    """SIGTERM stops the process as Ctrl-C does (stores closed, exit 0). rclpy's own SIGTERM handling
    sometimes misses the signal, and a process then killed with SIGKILL can leave Fast DDS
    shared-memory locks that hang its peers. Call before rclpy.init (rclpy chains to this handler)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def run_node(make: Callable[[], ManagedNode], name: str, args: list[str] | None, threads: int | None = None) -> int:
    """A node's console command: brought to active (unless autostart is false: then a lifecycle manager
    drives it), spun until Ctrl-C or SIGTERM (exit 0, also while it is still loading its models); a node
    that cannot be configured is one error line and exit status 2.

    Stopping is ordered: running callbacks end (a running goal is preempted and answered), then the node
    is destroyed (stop_executor: rclpy's own shutdown does not wait for callbacks), then the context goes.
    So rclpy's signal handlers are not installed: they would shut the context down at the signal, under
    the callbacks still running (a goal could no longer reach the memory nor send its result). While the
    node starts (models loading) the signal is a KeyboardInterrupt; once it spins, a flag looked at every
    SPIN_POLL_S (spin_until_stopped: never an exception inside the executor's own code)."""
    stop_on_sigterm()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node: ManagedNode | None = None
    executor: MultiThreadedExecutor | None = None
    try:
        try:
            with StopSignals() as stop:  # an error once a stop came is the stop's (an import cut short by it)
                # A library may swallow the interrupt and go on (a bare except around an import that prints
                # the traceback): the stop still holds (seen in CI: a perception_node went active and hung).
                node = make()
                stop.check()
                if autostarts(node):
                    bring_up(node, before_activate=stop.check)
        except Exception as error:  # noqa: BLE001 - any reason it cannot start is one line, not a traceback
            print(f"{name}: error: cannot start: {error}", file=sys.stderr)
            return 2
        with stop_signals_deferred():
            executor = MultiThreadedExecutor(num_threads=threads)
            executor.add_node(node)
        spin_until_stopped(executor, poll_s=SPIN_POLL_S)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        with stop_signals_held():
            if executor is not None:
                stop_executor(executor, [node])
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
    return 0
