"""`m3 bench fleet` small: robot processes store clips into one milvus-lite server while another
searches, the server is killed (SIGKILL) and restarted meanwhile, and nothing is lost or stored twice.
Kills at three moments (issue 21 D6: what a robot was told is stored survives a server crash)."""

from __future__ import annotations

import json

import pytest

from m3_agent.bench import fleet as bench_fleet


@pytest.mark.parametrize("kill_after_s", ["1.5", "3", "4.5"])
def test_fleet_bench_server_killed_loses_and_duplicates_nothing(kill_after_s, capsys, reliability_counts):
    args = ["--robots", "2", "--searchers", "1", "--clips", "30", "--per-clip", "10", "--kill-after-s", kill_after_s,
            "--outage-s", "1"]  # fmt: skip
    code = bench_fleet.main(args)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    reliability_counts.tried(result["memories"])
    reliability_counts.lost(result["lost"])
    assert code == 0, result
    assert result["memories"] == 600 and result["failed_robots"] == []
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["ingest_per_s"] > 0
