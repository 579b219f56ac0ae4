"""StopSignals: SIGTERM as Ctrl-C for the long-running commands, and check() at a stage boundary."""

from __future__ import annotations

import signal

import pytest

from m3_runtime.node_shutdown import StopRequested, StopSignals


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
