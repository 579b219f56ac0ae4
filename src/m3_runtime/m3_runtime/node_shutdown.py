"""Stopping in order: an executor whose callbacks have all ended before its nodes are destroyed
(stop_executor), and SIGTERM / Ctrl-C for the long-running commands (StopSignals) and for a process
already stopping (stop_signals_held). `spinning` does the same for nodes spun on a thread of their own
(tests, scripts that embed the nodes).

Why this exists: in rclpy 7.1 (Jazzy), `Executor.shutdown(timeout_sec)` says it waits for running
callbacks, but it does not: it sets `_is_shutdown` and then waits only `if not self._is_shutdown`,
which is never true there. `MultiThreadedExecutor` does not override it and never shuts down its
`ThreadPoolExecutor`. So after Ctrl-C or SIGTERM ends `spin()` in the main thread, the pool's workers
go on running the callbacks they hold while `destroy_node()` closes stores and frees models under
them: the SIGSEGV a CI run saw when memory_node got SIGTERM right after it went active.

Why joining the pool's threads is enough: a MultiThreadedExecutor runs every handler (each callback,
and each resumption of an async callback) by `submit`ting it to that pool, from spin's thread only.
Once spin has returned, nothing submits; `pool.shutdown(cancel_futures=True)` drops the handlers
queued but not started and makes each worker exit after the one it runs; a joined worker runs
nothing. So when stop_executor returns, no callback of that executor runs, and none can start.
(Waiting on the executor's work tracker instead would hang on an async callback suspended in an
`await`, which counts as executing, and would not keep queued handlers from starting.) An executor
without a pool (SingleThreadedExecutor) runs its handlers in spin's thread: nothing is left to wait for.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rclpy.executors import Executor, MultiThreadedExecutor

WARN_EVERY_S = 10.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _already_stopping(signum: int, _frame: Any) -> None:
    print(f"{signal.Signals(signum).name}: already stopping (SIGKILL forces it)", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Within it, Ctrl-C and SIGTERM only say that the process is already stopping: a second signal must
    not cut short the wait for callbacks or the closing of stores. The handlers are restored on exit."""
    previous = {signum: signal.signal(signum, _already_stopping) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """Within it, Ctrl-C and SIGTERM wait until it ends, then act as usual: what a signal would cut in
    half is built whole (a MultiThreadedExecutor interrupted in its __init__ prints an AttributeError
    traceback from its __del__: seen once in 200 stops of the SIGTERM stress test). Outside the main
    thread it does nothing: Python runs signal handlers in the main thread only, so nothing there is cut
    short (a lifecycle transition asked over its service configures in an executor thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, _frame: caught.append(signum)) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if caught:
            signal.raise_signal(caught[0])


def import_whole(*modules: str) -> None:
    """Import `modules` with Ctrl-C and SIGTERM deferred until they are in. A C extension that imports
    Python modules itself (protobuf's, under mediapipe) catches the interrupt, prints its traceback and goes
    on with a half-imported module: seen twice in 10 perception_node stops of the SIGTERM stress test."""
    import importlib

    with stop_signals_deferred():
        for module in modules:
            importlib.import_module(module)


_stop_seen = [""]  # the first signal any StopSignals of this process caught: signals are the process's


def stop_requested() -> str:
    """The stop signal this process has had ("sigint" / "sigterm"), "" none: a node's failure after it is
    the stop's doing (an import cut short), not a fault to report as an error."""
    return _stop_seen[0]


class StopRequested(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, raised in the main thread by StopSignals; signal_name: "sigint" or "sigterm"."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def stop_name(interrupt: BaseException) -> str:
    """The signal that stopped a command: a plain KeyboardInterrupt is Ctrl-C's default handler's."""
    return getattr(interrupt, "signal_name", "sigint")


class StopSignals:
    """A long-running command's SIGTERM and Ctrl-C (`with StopSignals() as stop:`), for `m3 replay`, `m3 play`,
    `m3 eval`, `m3 demo`: SIGTERM stops it as Ctrl-C does (as stop_on_sigterm does for the nodes), once;
    a later signal only says it is already stopping, so the command can store what it has, close its
    store and print its JSON line. raise_interrupt: the first signal raises StopRequested in the main
    thread; False: it only sets `name`, for a loop that polls it. Install it before rclpy.init: rclpy
    chains to it."""

    def __init__(self, raise_interrupt: bool = True) -> None:
        self.raise_interrupt = raise_interrupt
        self.name = ""  # the first signal that came: "sigint" or "sigterm"
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        self._previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if self.name and isinstance(exc, Exception):
            # An error once a stop was asked for is the stop's doing: an import cut short by the interrupt
            # reads as "package None is not installed" (seen: `m3 demo` stopped as its models loaded).
            raise StopRequested(self.name) from exc

    def check(self) -> None:
        """StopRequested if a signal came: for a command's stage boundaries, so a stop is honoured there
        even when a library swallowed the KeyboardInterrupt (a bare `except:` around an import)."""
        if self.name:
            raise StopRequested(self.name)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.name:
            _already_stopping(signum, frame)
            return
        self.name = signal.Signals(signum).name.lower()
        _stop_seen[0] = _stop_seen[0] or self.name
        if self.raise_interrupt:
            raise StopRequested(self.name)


def spin_until_stopped(executor: Executor, until: Callable[[], bool] = lambda: False, poll_s: float = 0.1) -> str:
    """Spin until Ctrl-C or SIGTERM (or until() is true, or the context goes), and return the signal's name
    ("" otherwise). Here a signal only sets a flag, looked at between spins (every poll_s at most): raised
    as an exception in the main thread it could land inside the executor's own bookkeeping and leave it
    half-updated, with a worker then waiting for ever (a memory_node stopped right after it went active
    hung so, in one of about a thousand stops of the SIGTERM stress test)."""
    with StopSignals(raise_interrupt=False) as stop:
        while executor.context.ok() and not stop.name and not until():
            executor.spin_once(timeout_sec=poll_s)
    return stop.name


def _pool_threads(executor: Executor) -> list[threading.Thread]:
    """Shut the executor's worker pool to new and queued work; its threads (none for a pool-less executor)."""
    pool = getattr(executor, "_executor", None)  # MultiThreadedExecutor's ThreadPoolExecutor (rclpy 7.1)
    if pool is None:
        return []
    pool.shutdown(wait=False, cancel_futures=True)
    return list(getattr(pool, "_threads", ()))


def _quiesce(executor: Executor, nodes: list[Any]) -> None:
    """Let the active managed nodes quiesce() (the control node's running goal ends PREEMPTED) while this
    thread goes on spinning, so that what the goal waits for (a memory reply) still arrives - as long as
    the context is up (rclpy's own signal handlers shut it down at the signal)."""
    quiescing = [
        threading.Thread(target=node.quiesce, name=f"quiesce-{node.get_name()}")
        for node in nodes
        if getattr(node, "active", False) and hasattr(node, "quiesce")
    ]
    for thread in quiescing:
        thread.start()
    for thread in quiescing:
        while thread.is_alive():
            try:
                if executor.context.ok():
                    executor.spin_once(timeout_sec=0.05)
                else:
                    thread.join(0.05)
            except KeyboardInterrupt:
                pass  # a second signal: go on stopping in order
            except Exception:  # noqa: BLE001 - the context went meanwhile: wait without spinning
                thread.join(0.05)


def _where(thread: threading.Thread) -> str:
    """The thread's current stack, innermost call last (as a traceback prints it)."""
    frame = sys._current_frames().get(thread.ident)
    return "".join(traceback.format_stack(frame)).rstrip() if frame is not None else "(no stack: it just ended)"


def stop_executor(executor: Executor, nodes: Iterable[Any] = (), warn_every_s: float = WARN_EVERY_S) -> None:
    """Return once no callback of `executor` runs or can start (module docstring), then shut it down.

    Call it from the thread that spun the executor, after spin has returned, and before destroy_node().
    Active managed nodes are asked to quiesce() first, so that a long callback (the control node's
    running goal) ends early instead of being waited for. The wait has no time limit: a store must not
    be closed under a callback; a callback still running is logged every `warn_every_s`, and another
    Ctrl-C or SIGTERM does not cut the wait short (SIGKILL does).
    """
    nodes = list(nodes)
    _quiesce(executor, nodes)
    threads = _pool_threads(executor)
    waited_since, told = time.monotonic(), False
    for thread in threads:
        while thread.is_alive():
            try:
                thread.join(warn_every_s)
            except KeyboardInterrupt:
                pass  # a second signal: the callback still runs, keep waiting for it
            if thread.is_alive():
                message = f"stopping: a callback still runs after {time.monotonic() - waited_since:.0f} s; waiting"
                if not told:  # once: where it is, so a user (or a test log) can see what it waits for
                    message += f"; it is at:\n{_where(thread)}"
                    told = True
                for node in nodes[:1]:
                    node.get_logger().warning(message)
    executor.shutdown(timeout_sec=0)  # releases its guard conditions; nothing runs any more


@contextlib.contextmanager
def spinning(*nodes: Any, num_threads: int = 4) -> Iterator[MultiThreadedExecutor]:
    """Spin `nodes` (and any node added to the yielded executor) on a thread of their own for the
    with-block; on leaving it, stop that executor in order (stop_executor) and destroy every node it holds.
    The executor runs in the first node's context (the default context when none is given).

    Why not `threading.Thread(target=executor.spin)` and `remove_node` + `destroy_node`: a node destroyed
    while the spinning thread builds a wait set with its entities kills that thread (rclpy 7.1:
    "InvalidHandle: cannot use Destroyable because destruction was requested"), and every node still
    added to it silently stops getting callbacks - a test's timers never fire.
    """
    executor = MultiThreadedExecutor(num_threads=num_threads, context=nodes[0].context if nodes else None)
    for node in nodes:
        executor.add_node(node)
    done = threading.Event()

    def spin() -> None:
        while executor.context.ok() and not done.is_set():
            executor.spin_once(timeout_sec=0.05)

    thread = threading.Thread(target=spin, name="spinning", daemon=True)
    thread.start()
    try:
        yield executor
    finally:
        done.set()
        thread.join()
        held = executor.get_nodes()
        stop_executor(executor, held)
        for node in held:
            node.destroy_node()
