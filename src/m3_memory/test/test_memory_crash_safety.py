"""kill -9 during ingestion: every clip reported stored is there after reopening; the store is intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from m3_memory.memory import Memory

HERE = Path(__file__).parent


def test_sigkill_loses_no_reported_clip(tmp_path, embedder):
    path = str(tmp_path / "m")
    env = dict(os.environ, PYTHONPATH=f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    child = subprocess.Popen(
        [sys.executable, str(HERE / "crash_ingester.py"), path], stdout=subprocess.PIPE, text=True, env=env
    )
    reported: list[int] = []
    try:
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while len(reported) < 12 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if line.startswith("stored "):
                reported.append(int(line.split()[1]))
        time.sleep(0.05)  # land the kill in the middle of a later clip
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    for line in child.stdout:  # anything printed before the kill was also committed
        if line.startswith("stored "):
            reported.append(int(line.split()[1]))
    assert len(reported) >= 12
    memory = Memory.open(path, embedder)
    try:
        assert memory.store.integrity_check() == []
        stored = set(memory.graph.clips)
        assert set(reported) <= stored
        assert stored <= set(range(max(reported) + 2))  # at most the clip in flight beyond the reported ones
        for index in reported:  # every reported clip is whole
            record = memory.search.clip_record(index)
            assert len(record.episodic) == 4, [n.text for n in record.episodic]
            assert any(f"item number {index} " in n.text for n in record.episodic)
        # ingestion continues after the crash, with fresh clip indexes
        assert memory.next_clip_index == max(stored) + 1
    finally:
        memory.close()
