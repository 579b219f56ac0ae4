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
