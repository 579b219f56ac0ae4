"""bench.py prints its figures as the last stdout line (control node + memory service in its own process).

Run as a subprocess: a second DDS participant created later in the same test process, after the
bench's context was shut down, did not get its first action goal answered (seen 3 in 3 runs).
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_prints_figures_last():
    done = subprocess.run(
        [sys.executable, "-m", "m3_control.bench", "--goals", "3", "--rounds", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures) == {"round_overhead_ms", "action_roundtrip_ms", "goals"}
    assert 0 < figures["round_overhead_ms"] < figures["action_roundtrip_ms"]
