"""The Milvus back-end against real milvus-lite servers: a memory reopened from Milvus is the memory
the SQLite default builds from the same clips, a local-directory milvus_uri starts its own server,
and a server outage loses and duplicates nothing (clips wait on disk and are written in order)."""

from __future__ import annotations

import os

import pytest
from m3mem_evidence import clip, face, match, voice
from memory_backends import fresh_prefix, open_memory
from pymilvus import MilvusClient

from m3_memory.assembly import open_memory as open_from_parameters
from m3_memory.errors import StoreError
from m3_memory.graph.memory_graph import GraphConfig
from m3_memory.memory import Memory
from m3_memory.milvus.backend import MilvusBackend, MilvusConfig
from m3_memory.milvus.server import MilvusLiteServer
from m3_memory.node_parameters import PARAMETERS


def clips() -> list:
    """Clips exercising every kind of write: new entities, crops, a merge, names, reinforcement."""
    return [
        clip(0, faces=[face("face_1", 1, crop=b"\xff\xd8jpeg")],
             voices=[voice("voice_1", 2, 4, "hi, my name is alice")]),
        clip(1, faces=[face("face_1", 31)], voices=[voice("voice_1", 32, 34, "I like green tea.")],
             matches=[match("face_1", "voice_1", 33)]),
        clip(2, faces=[face("face_2", 61)], voices=[voice("voice_1", 62, 64, "I really like green tea")]),
        clip(3, voices=[voice("voice_2", 91, 93, "I put the keys in the drawer")]),
    ]  # fmt: skip


def state(memory: Memory) -> dict:
    """What a memory holds, independent of the back-end."""
    graph = memory.graph
    return {
        "entities": {k: vars(v) for k, v in sorted(graph.entities.items())},
        "aliases": dict(sorted(graph.aliases.items())),
        "text": sorted((n.node_id, n.kind, n.text, n.clip_index, n.weight, tuple(n.entity_ids))
                       for n in graph.text.values()),
        "clips": {i: (c["entity_ids"], c["episodic"], sorted(c["semantic"])) for i, c in sorted(graph.clips.items())},
        "node_clips": dict(sorted(graph.node_clips.items())),
        "evidence": dict(sorted(graph.evidence.items())),
        "samples": {k: len(v) for k, v in sorted(graph.entity_samples.items())},
    }  # fmt: skip


def sqlite_reference(tmp_path, embedder, items) -> dict:
    reference = Memory.open(str(tmp_path / "reference"), embedder, GraphConfig())
    for item in items:
        reference.ingest(item)
    try:
        return state(reference)
    finally:
        reference.close()


def milvus_memory(server: MilvusLiteServer, prefix: str, embedder, spool_dir: str = "") -> Memory:
    config = MilvusConfig(uri=server.uri, collection_prefix=prefix, spool_dir=spool_dir)
    return Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig())


def test_reopened_from_milvus_equals_the_sqlite_memory(tmp_path, embedder, milvus_server):
    prefix = fresh_prefix()
    memory = open_memory("milvus", "", embedder, milvus_server, prefix=prefix)
    for item in clips():
        memory.ingest(item)
    written = state(memory)
    memory.close()
    reopened = open_memory("milvus", "", embedder, milvus_server, prefix=prefix)
    try:
        assert state(reopened) == written == sqlite_reference(tmp_path, embedder, clips())
        assert reopened.search.get_entity("voice_1").name == "Alice"
        assert reopened.graph.backend.entity_crop("face_1") == b"\xff\xd8jpeg"
        assert reopened.search.search_clip("green tea", top_k=1)[0].clip_index in (1, 2)
        assert reopened.store.integrity_check() == []
    finally:
        reopened.close()


def test_local_directory_uri_starts_its_own_server(tmp_path, embedder):
    p = {name: default for name, (default, _) in PARAMETERS.items()}
    p.update(memory_backend="milvus", milvus_uri=str(tmp_path / "milvus"), milvus_spool_dir=str(tmp_path / "spool"))
    memory = open_from_parameters(p, embedder)
    memory.ingest(clips()[0])
    memory.close()
    reopened = open_from_parameters(p, embedder)
    try:
        assert sorted(reopened.graph.clips) == [0] and reopened.next_clip_index == 1
    finally:
        reopened.close()


def test_server_outage_loses_and_duplicates_nothing(tmp_path, embedder):
    server = MilvusLiteServer(str(tmp_path / "data")).start()
    spool = str(tmp_path / "spool")
    memory = milvus_memory(server, "outage", embedder, spool)
    try:
        items = clips()
        memory.ingest(items[0])
        server.stop(kill=True)  # the server dies: the robot keeps storing clips, on disk
        for item in items[1:3]:
            assert memory.ingest(item) is not None
        assert len(os.listdir(spool)) == 2
        server.start()  # back on the same port and data
        memory.ingest(items[3])  # written after the two waiting clips, in order
        assert os.listdir(spool) == []
        memory.close()
        memory = milvus_memory(server, "outage", embedder, spool)
        assert state(memory) == sqlite_reference(tmp_path, embedder, items)
        client = MilvusClient(uri=server.uri)
        stored = client.query("outage_text", filter="", output_fields=["count(*)"])[0]["count(*)"]
        client.close()
        assert stored == len(memory.graph.text)  # each memory stored once
    finally:
        memory.close()
        server.stop()


def _killed_before_flush(backend, server, monkeypatch):
    """Issue 21 D6: Milvus acknowledges an upsert before it persists it; a server that dies between the
    write and the flush (the flush fails) loses it. Returns how the server comes back."""
    flush = backend.make_durable

    def killed(payloads) -> None:
        server.stop(kill=True)
        flush(payloads)  # the real flush, against a dead server

    monkeypatch.setattr(backend, "make_durable", killed)
    return lambda: (monkeypatch.setattr(backend, "make_durable", flush), server.start())


def _text_lost_under_the_write(backend, server, monkeypatch):
    """`m3 bench fleet`: a server killed and restarted in the middle of a clip's write (pymilvus retries the
    calls that failed against the new server) lost the text rows the old one had acknowledged, while the
    clip record and the flush went to the new one. Made here by deleting the rows the write just stored:
    the flush succeeds, and only reading the keys back finds them gone."""
    write = backend.write

    def lossy(payload: dict) -> None:
        write(payload)
        backend.client.delete(backend.text_name, ids=[row["node_key"] for row in payload["text"]])

    monkeypatch.setattr(backend, "write", lossy)
    return lambda: monkeypatch.setattr(backend, "write", write)


@pytest.mark.parametrize("fault", [_killed_before_flush, _text_lost_under_the_write], ids=["killed", "lost"])
def test_a_clip_milvus_did_not_keep_stays_spooled_and_is_stored_again_once(tmp_path, embedder, monkeypatch, fault):
    """A clip counts as stored only once Milvus has flushed it and holds its keys (make_durable); else it
    stays in the spool and is written again with the next clip, once (upserts on the same keys)."""
    server = MilvusLiteServer(str(tmp_path / "data")).start()
    spool, prefix = str(tmp_path / "spool"), f"fault_{fault.__name__.strip('_')}"
    memory = milvus_memory(server, prefix, embedder, spool)
    backend = memory.graph.backend
    try:
        items = clips()
        memory.ingest(items[0])
        assert backend.spool.pending() == []
        undo = fault(backend, server, monkeypatch)
        assert memory.ingest(items[1]) is not None  # acknowledged, not kept: spooled
        assert len(os.listdir(spool)) == 1
        undo()
        for item in items[2:]:
            memory.ingest(item)
        assert os.listdir(spool) == []
        memory.close()
        memory = milvus_memory(server, prefix, embedder, spool)
        assert state(memory) == sqlite_reference(tmp_path, embedder, items)
        client = MilvusClient(uri=server.uri)
        stored = client.query(f"{prefix}_text", filter="", output_fields=["count(*)"])[0]["count(*)"]
        client.close()
        assert stored == len(memory.graph.text)  # the clip written twice is stored once
    finally:
        memory.close()
        server.stop()


def test_migration_to_milvus_and_back_is_verified(tmp_path, embedder, milvus_server, capsys):
    import json

    from m3_memory.milvus.tools import from_milvus_main, to_milvus_main

    source = Memory.open(str(tmp_path / "robot"), embedder, GraphConfig())
    for item in clips():
        source.ingest(item)
    original = state(source)
    source.close()
    prefix = fresh_prefix()
    where = ["--uri", milvus_server.uri, "--prefix", prefix, "--robot-id", "robot_a"]
    assert to_milvus_main([str(tmp_path / "robot"), *where]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["problems"] == [] and report["copied"]["clips"] == 4 and report["copied"]["merged_ids"] == 1
    assert to_milvus_main([str(tmp_path / "robot"), *where]) == 2  # robot_a is taken: nothing written twice
    assert "already holds a memory" in capsys.readouterr().err
    config = MilvusConfig(uri=milvus_server.uri, collection_prefix=prefix, robot_id="robot_a")
    in_milvus = Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig())
    try:
        assert state(in_milvus) == original
    finally:
        in_milvus.close()
    assert from_milvus_main([str(tmp_path / "back"), *where]) == 0
    back = Memory.open(str(tmp_path / "back"), embedder, GraphConfig())
    try:
        assert state(back) == original and back.store.integrity_check() == []
        assert back.graph.backend.entity_crop("face_1") == b"\xff\xd8jpeg"
    finally:
        back.close()


def test_a_full_buffer_refuses_the_clip_and_leaves_no_trace(tmp_path, embedder):
    server = MilvusLiteServer(str(tmp_path / "data")).start()
    config = MilvusConfig(
        uri=server.uri, collection_prefix="full", spool_dir=str(tmp_path / "spool"), spool_max_mb=0.001
    )
    memory = Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig())
    try:
        items = clips()
        memory.ingest(items[0])
        server.stop(kill=True)
        with pytest.raises(StoreError, match=r"buffer .* is full"):  # 1 kB: no clip fits
            memory.ingest(items[1])
        server.start()
        memory.ingest(items[1])  # stored now, as if the refused attempt had never happened
        for item in items[2:]:
            memory.ingest(item)
        memory.close()
        memory = Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig())
        assert state(memory) == sqlite_reference(tmp_path, embedder, items)
    finally:
        memory.close()
        server.stop()


def test_an_idle_node_writes_its_buffered_clips_when_the_server_is_back(tmp_path, embedder):
    import time

    from m3_memory.ingest_worker import ClipIngester

    server = MilvusLiteServer(str(tmp_path / "data")).start()
    spool = str(tmp_path / "spool")
    memory = milvus_memory(server, "idle", embedder, spool)
    ingester = ClipIngester(memory, 4, 1.0)
    try:
        server.stop(kill=True)
        ingester.submit(clips()[0])
        assert ingester.wait_idle(60) and len(os.listdir(spool)) == 1  # stored on disk meanwhile
        server.start()  # no further clip comes: the idle worker writes the buffered one
        deadline = time.monotonic() + 30
        while os.listdir(spool) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert os.listdir(spool) == []
        other = milvus_memory(server, "idle", embedder, str(tmp_path / "other_spool"))
        try:
            assert sorted(other.graph.clips) == [0]
        finally:
            other.close()
    finally:
        ingester.close()
        memory.close()
        server.stop()


def test_a_memory_too_long_for_milvus_is_refused_before_anything_is_written(tmp_path, embedder, milvus_server):
    memory = open_memory("milvus", "", embedder, milvus_server)
    try:
        with pytest.raises(ValueError, match="Milvus holds at most 65535"):
            memory.ingest(clip(0, voices=[voice("voice_1", 1, 3, "la " * 30000)]))
        assert memory.graph.clips == {}
        assert memory.ingest(clips()[0]).clip_index == 0  # the next clip is stored as usual
        assert memory.graph.backend.spool.pending() == []
    finally:
        memory.close()


def test_collections_of_another_dimension_are_refused(embedder, milvus_server):
    prefix = fresh_prefix()
    MilvusBackend(MilvusConfig(uri=milvus_server.uri, collection_prefix=prefix), embedder.dim).close()
    with pytest.raises(StoreError, match="holds 384-d text embeddings; the embedder gives 8-d"):
        MilvusBackend(MilvusConfig(uri=milvus_server.uri, collection_prefix=prefix), 8)


def test_the_token_named_by_token_env_reaches_the_client(embedder, milvus_server, monkeypatch):
    """milvus_token_env: the token comes from the environment (never a parameter file) and goes to
    MilvusClient; Milvus Lite accepts it unchecked, so this proves the client path, not a refusal."""
    import pymilvus

    tokens = []

    class Recording(pymilvus.MilvusClient):
        def __init__(self, *args, **kwargs):
            tokens.append(kwargs.get("token"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(pymilvus, "MilvusClient", Recording)
    monkeypatch.setenv("M3_TEST_MILVUS_TOKEN", "root:Milvus")
    prefix = fresh_prefix()
    config = MilvusConfig(uri=milvus_server.uri, collection_prefix=prefix, token_env="M3_TEST_MILVUS_TOKEN")
    memory = Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig())
    try:
        for item in clips():
            memory.ingest(item)
        assert memory.search.get_entity("voice_1").name == "Alice"
    finally:
        memory.close()
    monkeypatch.delenv("M3_TEST_MILVUS_TOKEN")
    MilvusBackend(config, embedder.dim).close()  # named but unset: no token
    assert tokens == ["root:Milvus", ""]


def test_a_large_memory_reopens_with_its_saved_index_and_never_with_another_memorys(tmp_path, embedder, milvus_server):
    """Closing keeps the text index beside the robot's clip buffer, so reopening loads it instead of
    rebuilding it from Milvus, with the same answers; another memory later stored under the same
    robot id and prefix (same count of memories) never takes it, and a damaged file is rebuilt."""
    from m3_agent.bench.memory import ingest, synthetic_texts

    prefix, spool = fresh_prefix(), tmp_path / "spool"
    config = MilvusConfig(uri=milvus_server.uri, collection_prefix=prefix, spool_dir=str(spool))

    def opened() -> Memory:
        return Memory(MilvusBackend(config, embedder.dim), embedder, GraphConfig())

    def found(memory: Memory) -> list[str]:
        return [hit.node_id for hit in memory.search.search_node("where did he put the keys", top_k=10)]

    texts = synthetic_texts(400, 4, 400)  # past EXACT_MAX: an HNSW graph, not the exact scan
    memory = opened()
    ingest(memory, texts, 50, 4, embedder.embed_batch(texts), "bulk")
    expected = found(memory)
    memory.close()  # saves the index
    assert (spool / "text_index.hnsw").is_file() and (spool / "text_index.json").is_file()
    reopened = opened()
    try:
        assert reopened.graph.text_index_loaded and found(reopened) == expected
    finally:
        reopened.graph.backend.close()  # not close(): keep the saved index as it is
    client = MilvusClient(uri=milvus_server.uri)
    for name in (f"{prefix}_text", f"{prefix}_records"):
        client.drop_collection(name)
    other = [text.replace("keys", "gloves") for text in texts]  # another memory, as many memories
    memory = opened()
    ingest(memory, other, 50, 4, embedder.embed_batch(other), "bulk")
    rebuilt = found(memory)
    memory.graph.backend.close()
    reopened = opened()
    try:
        assert not reopened.graph.text_index_loaded and found(reopened) == rebuilt
    finally:
        reopened.close()  # saves this memory's index
    (spool / "text_index.hnsw").write_bytes(b"\0" * 4096)  # damaged, its description intact
    reopened = opened()
    try:
        assert not reopened.graph.text_index_loaded and found(reopened) == rebuilt
    finally:
        reopened.graph.backend.close()
