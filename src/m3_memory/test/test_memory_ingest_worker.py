"""The ingest worker: clips are memorized beside the producer, stored in order, and none is lost when
the model is down (it waits), answers nonsense (stored degraded, marked, logged) or is still down at
shutdown (the rest stored degraded). Stand-in servers; the real model: test/test_llm_memorizer.py."""

from __future__ import annotations

import json
import time

from m3mem_evidence import clip, face, voice
from test_memory_openai_memorizer import ScriptedServer

from m3_memory.graph.memory_graph import DEGRADED_PREFIX
from m3_memory.ingest_worker import ClipIngester
from m3_memory.memorize.openai_compatible import OpenAIMemorizer
from m3_memory.memory import Memory

REPLY = json.dumps({"names": [], "semantic": [], "episodic": []})


def talk(index: int):
    return clip(
        index,
        faces=[face("face_1", index * 30 + 1.0)],
        voices=[voice("voice_1", index * 30 + 2, index * 30 + 3, f"line {index}")],
    )


def test_clips_wait_for_a_restarting_model_and_are_stored_in_order(tmp_path, embedder):
    first = ScriptedServer([REPLY])
    port = first.server.server_address[1]
    memorizer = OpenAIMemorizer(first.url, "m", max_retries=1, timeout_s=2)
    memory = Memory.open(str(tmp_path / "m"), embedder, memorizer=memorizer)
    stored, logs = [], []
    ingester = ClipIngester(
        memory, backlog=2, retry_max_s=0.2, on_stored=stored.append, log=lambda lv, m: logs.append(m)
    )
    ingester.submit(talk(0))
    assert ingester.wait_idle(10)
    first.close()  # the model server goes away
    started = time.monotonic()
    for index in (1, 2):
        ingester.submit(talk(index))
    time.sleep(1.0)
    assert ingester.pending == 2 and [r.clip_index for r in stored] == [0]
    second = ScriptedServer([REPLY, REPLY], port)  # the server comes back on the same port
    assert ingester.wait_idle(20), logs
    stats = ingester.close(5)
    assert [r.clip_index for r in stored] == [0, 1, 2] and stats.degraded == 0 and stats.waits >= 2
    assert any("waits for the memorizer" in m for m in logs) and time.monotonic() - started >= 1.0
    assert memory.search.get_stats().clips == 3
    memory.close()
    second.close()


def test_backlog_full_blocks_the_producer_instead_of_dropping(tmp_path, embedder):
    memory = Memory.open(str(tmp_path / "m"), embedder)  # rules memorizer, made slow
    original = memory.memorizer.memorize

    def slow(*args, **kwargs):
        time.sleep(0.3)
        return original(*args, **kwargs)

    memory.memorizer.memorize = slow
    logs = []
    ingester = ClipIngester(memory, backlog=1, log=lambda lv, m: logs.append(m))
    started = time.monotonic()
    for index in range(3):
        ingester.submit(talk(index))
    assert time.monotonic() - started >= 0.5  # the third submit waited for room
    assert any("backlog full" in m for m in logs)
    assert ingester.close(10).stored == 3 and memory.search.get_stats().clips == 3
    memory.close()


def test_unusable_replies_and_shutdown_store_degraded_clips_marked(tmp_path, embedder):
    server = ScriptedServer(["nonsense"] * 2)
    memorizer = OpenAIMemorizer(server.url, "m", max_retries=2, timeout_s=2)
    memory = Memory.open(str(tmp_path / "m"), embedder, memorizer=memorizer)
    logs = []
    ingester = ClipIngester(memory, retry_max_s=0.2, log=lambda lv, m: logs.append((lv, m)))
    ingester.submit(talk(0))
    assert ingester.wait_idle(10)
    server.close()  # gone for good: the next clip waits until shutdown gives up on it
    ingester.submit(talk(1))
    stats = ingester.close(1.0)
    assert stats.stored == 2 and stats.degraded == 2
    meta = memory.store.export_json()["meta"]
    assert "unusable" in meta[f"{DEGRADED_PREFIX}0"] and "shut down" in meta[f"{DEGRADED_PREFIX}1"]
    assert [lv for lv, m in logs if "DEGRADED" in m] == ["error", "error"]
    texts = [n.text for n in memory.search.clip_record(1).episodic]
    assert texts == ["<face_1> is seen.", '<voice_1> says: "line 1"']  # the rules memorizer's record
    memory.close()


def test_the_memorizer_reads_its_system_prompt_before_the_first_clip(tmp_path, embedder):
    """The worker's first request is a 1-token warm-up with the system prompt (a prompt-caching server
    then reuses it), made before any clip is closed; a model that is down then is only logged."""
    server = ScriptedServer([REPLY])
    memorizer = OpenAIMemorizer(server.url, "m", max_retries=1, timeout_s=2)
    memory = Memory.open(str(tmp_path / "m"), embedder, memorizer=memorizer)
    ingester = ClipIngester(memory, retry_max_s=0.2)
    deadline = time.monotonic() + 10
    while not server.warm_ups and time.monotonic() < deadline:
        time.sleep(0.05)
    (warm_up,) = server.warm_ups
    assert server.requests == []  # nothing submitted yet
    messages = warm_up["body"]["messages"]
    assert messages[0] == {"role": "system", "content": memorizer.prompt} and warm_up["body"]["max_tokens"] == 1
    ingester.submit(talk(0))
    stats = ingester.close(10)
    assert stats.stored == 1 and stats.degraded == 0 and len(server.requests) == 1 and stats.warm_up_s > 0
    assert server.requests[0]["body"]["messages"][0] == messages[0]  # the clip's request starts with it
    memory.close()
    server.close()

    down = OpenAIMemorizer(server.url, "m", max_retries=1, timeout_s=2)  # nothing listens there now
    memory = Memory.open(str(tmp_path / "m2"), embedder, memorizer=down)
    logs = []
    ingester = ClipIngester(memory, retry_max_s=0.2, log=lambda lv, m: logs.append((lv, m)))
    stats = ingester.close(5)
    assert stats.stored == 0 and stats.warm_up_s == 0.0
    assert [lv for lv, m in logs if "warm-up skipped" in m] == ["warning"]
    memory.close()
