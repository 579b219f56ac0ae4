"""StopSignals: SIGTERM as Ctrl-C for the long-running commands, and check() at a stage boundary."""

from __future__ import annotations

import signal
import sys
import threading

import pytest

from m3_runtime.node_shutdown import StopRequested, StopSignals, import_whole


def test_sigterm_raises_once_and_check_raises_it_again_after_a_library_swallowed_it():
    with StopSignals() as stop:
        stop.check()  # nothing came yet
        try:
            signal.raise_signal(signal.SIGTERM)
        except BaseException:  # noqa: BLE001 - what a bare `except:` in a library does
            pass
        assert stop.name == "sigterm"
        with pytest.raises(StopRequested) as stopped:
            stop.check()  # the next stage boundary stops all the same
        assert stopped.value.signal_name == "sigterm"
        signal.raise_signal(signal.SIGTERM)  # a second signal only says it is already stopping


def test_an_error_after_the_signal_is_the_stop_not_a_failure():
    """An import cut short by the interrupt raised ImportError ("package None is not installed", exit 2)."""
    with pytest.raises(StopRequested) as stopped, StopSignals():
        try:
            signal.raise_signal(signal.SIGTERM)
        except BaseException:  # noqa: BLE001 - swallowed, and then the half-done work fails
            pass
        raise ImportError("cannot import name 'InferenceSession'")
    assert stopped.value.signal_name == "sigterm" and isinstance(stopped.value.__cause__, ImportError)


def test_an_error_without_a_signal_stays_that_error():
    with pytest.raises(ImportError), StopSignals():
        raise ImportError("a real missing package")


def test_a_signal_while_import_whole_imports_comes_once_the_module_is_in(tmp_path, monkeypatch):
    """protobuf's C extension caught the interrupt inside an import and printed its traceback (2 of 10
    perception_node stops in a CI run): the signal now waits until the module has finished importing."""
    (tmp_path / "slow_to_import.py").write_text(
        "import signal\n"
        "try:\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "    finished = True\n"
        "except BaseException:  # what that C extension does\n"
        "    finished = False\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_to_import", raising=False)
    with pytest.raises(StopRequested) as stopped, StopSignals():
        import_whole("slow_to_import")
    assert sys.modules["slow_to_import"].finished
    assert stopped.value.signal_name == "sigterm"


def test_import_whole_outside_the_main_thread_just_imports():
    """A lifecycle transition asked over its service configures in an executor thread, where no signal
    handler can be installed (nor run): the perception node's configure failed there with ValueError."""
    failures: list[BaseException] = []

    def configure() -> None:
        try:
            import_whole("json")
        except BaseException as error:  # noqa: BLE001 - recorded for the assertion
            failures.append(error)

    worker = threading.Thread(target=configure)
    worker.start()
    worker.join()
    assert not failures
