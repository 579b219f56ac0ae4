"""The reliability suite across every test directory (a pytest marker, the files stay where they are).

A test is in the suite when it is marked `reliability` or when its name says it feeds bad input or
kills something (RELIABILITY_NAMES: bad, malformed, corrupt, truncated, damaged, flood, kill, crash,
garbage, invalid, refused, rejected, oversized, torn, concurrent, SIGTERM). Run it alone with
`tools/run_tests.sh -m reliability`.

A test counts what it tried with the `reliability_counts` fixture (`tried(n)` bad inputs sent,
`lost(n)` things that should have survived and did not); one that counts nothing counts as one
input. At the end of the session one line sums the suite's tests: inputs tried, crashes (tests of
the suite that failed or errored) and lost; tools/run_tests.sh adds those lines up over the
directories.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("reliability") is None and RELIABILITY_NAMES.search(item.name):
            item.add_marker(pytest.mark.reliability)


@pytest.fixture
def reliability_counts(request: pytest.FixtureRequest) -> Counts:
    """Count the bad inputs this test tries and anything it finds lost."""
    return _counts.setdefault(request.node.nodeid, Counts())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if item.get_closest_marker("reliability") is not None and (report.when == "call" or report.failed):
        _counts.setdefault(item.nodeid, Counts())  # a test that ran (not one skipped)
        if report.failed:
            _crashed.add(item.nodeid)
    return report


def pytest_terminal_summary(terminalreporter) -> None:
    if not _counts:
        return
    tried = sum(c.inputs or 1 for c in _counts.values())
    lost = sum(c.missing for c in _counts.values())
    line = SUMMARY.format(tests=len(_counts), tried=tried, crashes=len(_crashed), lost=lost)
    terminalreporter.write_line(line)
