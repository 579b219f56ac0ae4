"""Session hooks of every test directory: the reliability suite, and processes tests left running.

The reliability suite is a pytest marker (the files stay where they are).

A test is in the suite when it is marked `reliability` or when its name says it feeds bad input or
kills something (RELIABILITY_NAMES: bad, malformed, corrupt, truncated, damaged, flood, kill, crash,
garbage, invalid, refused, rejected, oversized, torn, concurrent, SIGTERM). Run it alone with
`tools/run_tests.sh -m reliability`.

A test counts what it tried with the `reliability_counts` fixture (`tried(n)` bad inputs sent,
`lost(n)` things that should have survived and did not); one that counts nothing counts as one
input. At the end of the session one line sums the suite's tests: inputs tried, crashes (tests of
the suite that failed or errored) and lost; tools/run_tests.sh adds those lines up over the
directories.

A process a test started and nobody stopped (an orphan of a killed parent, a child never waited
for) can answer a later test's DDS queries under a node name that test uses too. At the end of the
session every process that inherited this session's mark and still runs is killed and named with the
test it appeared in ("processes left running after the session").
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

RELIABILITY_NAMES = re.compile(
    r"bad|malformed|corrupt|truncat|damag|flood|kill|crash|garbage|invalid|refus|reject|oversiz|torn|concurren|sigterm",
    re.IGNORECASE,
)
SUMMARY = "reliability suite: {tests} tests, {tried} inputs tried, {crashes} crashes, {lost} lost"


@dataclass
class Counts:
    """What one reliability test tried; filled in through the `reliability_counts` fixture."""

    inputs: int = 0
    missing: int = 0

    def tried(self, n: int = 1) -> None:
        self.inputs += n

    def lost(self, n: int = 1) -> None:
        self.missing += n


_counts: dict[str, Counts] = {}
_crashed: set[str] = set()

SESSION_MARK = "M3_TEST_SESSION"
os.environ[SESSION_MARK] = uuid.uuid4().hex  # a pytest run inside a test marks its own children
MULTIPROCESSING_HELPER = re.compile(r"from multiprocessing\.(?:resource_tracker|forkserver) import main")
_mark = f"{SESSION_MARK}={os.environ[SESSION_MARK]}".encode()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("reliability") is None and RELIABILITY_NAMES.search(item.name):
            item.add_marker(pytest.mark.reliability)


@pytest.fixture
def reliability_counts(request: pytest.FixtureRequest) -> Counts:
    """Count the bad inputs this test tries and anything it finds lost."""
    return _counts.setdefault(request.node.nodeid, Counts())


_started_in: dict[int, tuple[str, str]] = {}  # pid -> (the test it appeared in, its command line)


def _session_processes() -> dict[int, str]:
    """pid -> command line of every live process (this one excepted) that inherited this session's mark."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if _mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if MULTIPROCESSING_HELPER.search(command):  # lives as long as this process, by design
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z":  # a zombie has exited; its parent has not reaped it yet
                found[int(entry.name)] = command
        except OSError:  # exited while being read, or not ours to read
            continue
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    result = yield
    for pid, command in _session_processes().items():
        _started_in.setdefault(pid, (item.nodeid, command.strip()[:160]))
    return result


def _left_running() -> list[str]:
    """After the session's fixtures are torn down: the processes still running, named by the test they
    appeared in (a session fixture's server appears in its first test and is stopped by now)."""
    deadline = time.monotonic() + 5.0  # a process told to stop may still be on its way out
    while (left := set(_session_processes())) and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = []
    for pid in sorted(left):
        test, command = _started_in.get(pid, ("(no test: started between tests)", ""))
        lines.append(f"{test}: pid {pid} {command}")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if item.get_closest_marker("reliability") is not None and (report.when == "call" or report.failed):
        _counts.setdefault(item.nodeid, Counts())  # a test that ran (not one skipped)
        if report.failed:
            _crashed.add(item.nodeid)
    return report


def pytest_terminal_summary(terminalreporter) -> None:
    if left := _left_running():
        terminalreporter.write_sep("=", f"processes left running after the session ({len(left)}), killed")
        for line in left:
            terminalreporter.write_line(line)
    if not _counts:
        return
    tried = sum(c.inputs or 1 for c in _counts.values())
    lost = sum(c.missing for c in _counts.values())
    line = SUMMARY.format(tests=len(_counts), tried=tried, crashes=len(_crashed), lost=lost)
    terminalreporter.write_line(line)
