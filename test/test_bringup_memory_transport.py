"""The one-process bring-up wires the control node to the memory node's Memory directly (default) or
through the memory services (`m3 run --memory-transport service`); either way an Instruct goal sent
from another process (`m3 ask`) is answered from the memory directory."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from m3_agent import bringup


def test_transport_choice():
    both = ("memory_node", "control_node")
    assert bringup.memory_transport_for(bringup.NODE_NAMES) == "direct"
    assert bringup.memory_transport_for(both, "service") == "service"
    assert bringup.memory_transport_for(("control_node",)) == "service"  # memory runs elsewhere
    assert bringup.memory_transport_for(("perception_node", "memory_node")) is None  # no control node
    with pytest.raises(ValueError, match="needs memory_node in this process"):
        bringup.memory_transport_for(("control_node",), "direct")
    with pytest.raises(ValueError, match="choose one of"):
        bringup.memory_transport_for(both, "dds")


def test_direct_without_memory_node_is_a_clear_error():
    result = subprocess.run(
        ["m3", "run", "--nodes", "control_node", "--memory-transport", "direct", "--exit-after", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "memory transport 'direct' needs memory_node in this process" in result.stderr


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory):
    """A memory of three episodic memories (bulk ingest, real MiniLM embeddings)."""
    from m3_memory.graph.records import KIND_EPISODIC, ClipEvidence, MemoryDraft
    from m3_memory.memory import Memory

    path = tmp_path_factory.mktemp("transport") / "memory"
    ns = 1_000_000_000
    texts = [
        ["Alice put the car keys in the hallway drawer.", "Bob made black coffee in the kitchen."],
        ["Carol watered the plants on the balcony."],
    ]
    memory = Memory.open(str(path))
    try:
        clips = [
            (
                ClipEvidence(c, c * 30 * ns, (c + 1) * 30 * ns),
                [MemoryDraft(KIND_EPISODIC, t, c * 30 * ns + i * ns, c * 30 * ns + i * ns) for i, t in enumerate(ts)],
            )
            for c, ts in enumerate(texts)
        ]
        assert memory.ingest_bulk(clips) == 3
    finally:
        memory.close()
    return path


@pytest.mark.parametrize("transport", ["direct", "service"])
def test_run_answers_an_instruct_goal(memory_dir, tmp_path, transport):
    log = tmp_path / "run.log"
    command = ["m3", "run", "--nodes", "memory_node", "control_node", "--set", f"memory_node.memory_dir={memory_dir}"]
    if transport == "service":
        command += ["--memory-transport", "service"]  # direct is the default
    with open(log, "w") as handle:
        run = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, text=True)
    try:
        answer = subprocess.run(
            ["m3", "ask", "Where did Alice put the car keys?", "--json", "--wait", "90"],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert answer.returncode == 0, (answer.stdout, answer.stderr, log.read_text()[-3000:])
        result = json.loads(answer.stdout.strip().splitlines()[-1])
        assert "hallway drawer" in result["answer"], result
        assert result["evidence_ids"], result
    finally:
        run.send_signal(signal.SIGINT)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()
    time.sleep(0.2)
    text = log.read_text()
    if transport == "direct":
        assert "memory through DirectMemoryClient (in this process, no services)" in text, text[-3000:]
    else:
        assert "memory services under /m3/memory" in text, text[-3000:]
