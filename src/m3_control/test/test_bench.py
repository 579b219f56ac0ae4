"""bench.py prints its figures as the last stdout line (runs the control node in-process over DDS)."""

from __future__ import annotations

import json

from m3_control import bench


def test_bench_prints_figures_last(capsys):
    assert bench.main(["--goals", "3", "--rounds", "3"]) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(figures) == {"round_overhead_ms", "action_roundtrip_ms", "goals"}
    assert 0 < figures["round_overhead_ms"] < figures["action_roundtrip_ms"]
