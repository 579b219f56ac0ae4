"""`m3 bench control` over a real (small) memory: builds it, prints its figures as the last stdout line,
reuses a built --memory-dir (also over the service transport, the memory node in its own process or
in the bench's), and refuses one holding fewer memories
than asked for.

Run as subprocesses: a second DDS participant created later in the same test process, after the
bench's context was shut down, did not get its first action goal answered (seen 3 in 3 runs).
"""

from __future__ import annotations

import json
import subprocess
import sys


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "m3_agent.bench.control", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_bench_builds_measures_and_reuses(tmp_path):
    memory_dir, cache = tmp_path / "memory", tmp_path / "cache"
    common = ["--memory-dir", str(memory_dir), "--embedding-cache", str(cache), "--goals", "3", "--rounds", "3"]
    done = bench("--memory-nodes", "400", "--sentence-set", "60", *common)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["memory_nodes"] == 400 and figures["memory_built"] is True
    assert figures["embedding"] == "sentence_set:60" and figures["memory_transport"] == "direct"
    assert figures["text_runtime"] == "onnxruntime"
    assert figures["rounds_measured"] == 9  # 3 goals x 3 rounds
    assert 0 < figures["loop_only_ms"] < figures["round_overhead_ms"]  # the memory searches are included
    assert figures["search_clip_p50_ms"] > 0 and figures["search_node_p50_ms"] > 0
    assert figures["memories_per_search"] > 0  # the scripted queries find memories above the 0.5 threshold
    assert figures["round_overhead_warm_ms"] > 0
    assert 0 < figures["action_roundtrip_1round_ms"] < figures["action_roundtrip_ms"]
    assert list(cache.glob("*.npy")), "sentence embeddings were not cached"

    again = bench("--memory-nodes", "400", "--no-ros", "--text-runtime", "torch", *common)
    assert again.returncode == 0, again.stderr[-3000:]
    reused = json.loads(again.stdout.strip().splitlines()[-1])
    assert reused["memory_built"] is False and reused["memory_nodes"] == 400
    assert reused["text_runtime"] == "torch"  # the other runtime searches the same stored vectors
    assert reused["memories_per_search"] == figures["memories_per_search"]
    assert "action_roundtrip_ms" not in reused

    for process in ("separate", "shared"):  # the memory node in its own process (default), then in the bench's
        served = bench("--memory-nodes", "400", "--memory-transport", "service", "--memory-process", process, *common)
        assert served.returncode == 0, served.stderr[-3000:]
        service = json.loads(served.stdout.strip().splitlines()[-1])
        assert service["memory_transport"] == "service" and service["memory_process"] == process
        assert service["rounds_measured"] == 9
        assert service["memories_per_search"] == figures["memories_per_search"]  # the same memory over DDS
        assert 0 < service["entity_names_p50_ms"] and 0 < service["name_lookups_per_round"] <= 1
        assert service["entity_name_p50_ms"] is None  # no get_entity per id any more
        assert "action_roundtrip_ms" not in service
    left = subprocess.run(["pgrep", "-f", f"memory_dir={memory_dir}"], capture_output=True, text=True, check=False)
    assert left.stdout == "", f"the memory node process outlived the bench: {left.stdout}"

    more = bench("--memory-nodes", "1000", "--no-ros", *common)
    assert more.returncode == 2
    assert "holds 400 memories, fewer than --memory-nodes 1000" in more.stderr
