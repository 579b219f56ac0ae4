"""`m3 bench memory` end to end on a small memory (figures are printed, not asserted on speed)."""

from __future__ import annotations

import json

from m3_agent.bench import memory as bench


def test_bench_prints_figures_as_last_line(capsys, tmp_path):
    args = ["--nodes", "120", "--queries", "8", "--per-clip", "40", "--memory-dir", str(tmp_path / "m")]
    assert bench.main([*args, "--embedding-cache", str(tmp_path / "cache")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["nodes"] == 120 and result["nodes_added"] == 120
    assert result["recall_at_10"] == 1.0  # 120 vectors: below EXACT_MAX the index scans exactly
    assert result["search_p50_ms"] > 0 and result["search_p99_ms"] >= result["search_p50_ms"]
    assert result["service_p99_ms"] > 0 and result["ingest_nodes_per_s"] > 0 and result["disk_bytes_per_node"] > 0
    assert result["peak_rss_mb"] > 100  # torch, onnxruntime and the models are resident
    # every bench memory has a place: time and place windows are timed and checked against exact filtered search
    assert result["search_time_p99_ms"] > 0 and result["search_place_p99_ms"] > 0
    assert result["search_time_first_ms"] > 0 and result["search_place_first_ms"] > 0
    assert result["recall_at_10_time"] == 1.0 and result["recall_at_10_place"] == 1.0


def test_bench_on_milvus_prints_the_same_figures(capsys, tmp_path):
    args = ["--nodes", "120", "--queries", "8", "--per-clip", "40", "--memory-dir", str(tmp_path / "m"), "--backend"]
    assert bench.main([*args, "milvus", "--embedding-cache", str(tmp_path / "cache")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["backend"] == "milvus" and result["nodes"] == 120 and result["recall_at_10"] == 1.0
    assert result["recall_at_10_time"] == 1.0 and result["recall_at_10_place"] == 1.0  # places on Milvus too
    assert result["service_p99_ms"] > 0 and result["ingest_nodes_per_s"] > 0 and result["disk_bytes_per_node"] > 0
