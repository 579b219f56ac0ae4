"""`m3 bench fleet` small: robot processes store clips into one milvus-lite server while another
searches, the server is killed and restarted meanwhile, and nothing is lost or stored twice."""

from __future__ import annotations

import json

from m3_agent.bench import fleet as bench_fleet


def test_fleet_bench_loses_and_duplicates_nothing(capsys):
    args = ["--robots", "2", "--searchers", "1", "--clips", "30", "--per-clip", "10", "--kill-after-s", "2",
            "--outage-s", "1"]  # fmt: skip
    assert bench_fleet.main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["memories"] == 600 and result["failed_robots"] == []
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["ingest_per_s"] > 0
