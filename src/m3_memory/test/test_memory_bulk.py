"""Bulk building of large memories: Memory.ingest_bulk stores what per-clip ingest stores, atomically."""

from __future__ import annotations

import numpy as np
import pytest

from m3_agent.bench.memory import ingest, node_vectors, synthetic_texts
from m3_memory.graph.records import KIND_EPISODIC, KIND_SEMANTIC, ClipEvidence, MemoryDraft
from m3_memory.memory import Memory

NS = 1_000_000_000


def _rows(mem: Memory) -> list[tuple]:
    conn = mem.store.conn()
    return conn.execute(
        "SELECT node_id, text, clip_index, start_ns, end_ns, weight FROM text_nodes ORDER BY seq"
    ).fetchall()


def test_bulk_ingest_matches_per_clip_ingest(tmp_path, embedder):
    texts = synthetic_texts(400)
    vectors = embedder.embed_batch(texts)
    stores = {}
    for mode in ("clip", "bulk"):
        mem = Memory.open(str(tmp_path / mode), embedder)
        ingest(mem, texts, 50, 40, vectors, mode=mode, batch=120)  # bulk: 3 clips per transaction
        stores[mode] = mem
    clip_mem, bulk_mem = stores["clip"], stores["bulk"]
    assert _rows(bulk_mem) == _rows(clip_mem)
    edges = "SELECT node_id, entity_id FROM edges ORDER BY node_id, entity_id"
    assert bulk_mem.store.conn().execute(edges).fetchall() == clip_mem.store.conn().execute(edges).fetchall()
    assert bulk_mem.store.integrity_check() == []
    assert sorted(bulk_mem.graph.clips) == sorted(clip_mem.graph.clips)
    query = "where did <voice_3> put the keys?"
    bulk_hits = [(h.node_id, round(h.score, 4)) for h in bulk_mem.search.search_node(query, top_k=5)]
    assert bulk_hits == [(h.node_id, round(h.score, 4)) for h in clip_mem.search.search_node(query, top_k=5)]
    record = bulk_mem.search.clip_record(3)
    assert [n.text for n in record.episodic] == texts[150:200]
    assert "voice_4" in record.entity_ids and "person_4" in record.entity_ids
    entity = bulk_mem.search.get_entity("voice_2")
    mentions = [f"episodic_{i + 1}" for i, text in enumerate(texts) if "<voice_2>" in text]
    assert len(mentions) >= 5 and list(entity.memory_ids) == mentions[::-1]  # newest first
    bulk_mem.close()  # saves the index: reopening loads it instead of rebuilding
    clip_mem.close()
    reopened = Memory.open(str(tmp_path / "bulk"), embedder)
    assert reopened.graph.text_index_loaded and len(reopened.graph.text_index) == 400
    assert [(h.node_id, round(h.score, 4)) for h in reopened.search.search_node(query, top_k=5)] == bulk_hits
    reopened.close()


def test_bulk_ingest_is_atomic_and_checks_its_input(memory, embedder):
    first = ClipEvidence(0, 0, 30 * NS)
    drafts = [MemoryDraft(KIND_EPISODIC, f"the mug is on shelf {i}.", i * NS, i * NS) for i in range(3)]
    duplicate = [*drafts, MemoryDraft(KIND_EPISODIC, drafts[0].text, 0, 0)]  # the same event twice: stored once
    assert memory.ingest_bulk([(first, duplicate)]) == 3
    before = len(memory.graph.text)
    second = ClipEvidence(1, 30 * NS, 60 * NS)
    with pytest.raises(ValueError):  # clip 0 exists: nothing of the batch is stored
        memory.ingest_bulk([(second, drafts), (first, drafts)])
    with pytest.raises(ValueError):
        memory.ingest_bulk([(second, [MemoryDraft(KIND_SEMANTIC, "a fact.", 0, 0)])])
    assert len(memory.graph.text) == before and 1 not in memory.graph.clips
    assert memory.store.conn().execute("SELECT count(*) FROM clips").fetchone()[0] == 1
    later = [MemoryDraft(KIND_EPISODIC, f"the red umbrella is in box {i}.", 40 * NS, 40 * NS) for i in range(3)]
    assert memory.ingest_bulk([(second, later)], embedder.embed_batch([d.text for d in later])) == 3
    assert memory.search.search_node("the red umbrella is in box 2.", top_k=1)[0].node_id == "episodic_6"
    assert memory.store.integrity_check() == []


def test_sentence_set_vectors_are_cached_and_jittered(tmp_path, embedder):
    texts = synthetic_texts(30, sentence_set=10)
    assert texts[23] == texts[3].replace("(event 3)", "(event 23)") and len(set(texts)) == 30
    vectors, rate = node_vectors(embedder, texts, 10, str(tmp_path))
    assert rate is not None and vectors.shape == (30, embedder.dim)
    again, cached_rate = node_vectors(embedder, texts, 10, str(tmp_path))
    assert cached_rate is None and np.array_equal(again, vectors)  # second time from the cache
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = float(vectors[23] @ vectors[3])
    assert 0.97 < cosine < 0.999  # like two MiniLM sentences that differ in their event number


def test_index_search_survives_a_stranded_hnsw_search():
    """hnswlib raises when a search reaches fewer than k vectors (seen at 1M near-duplicate memories):
    the index retries with a larger ef and then returns what the search reaches."""
    from m3_memory.store.ann_index import CosineIndex

    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(400, 16)).astype(np.float32)
    index = CosineIndex(16, capacity=512)
    index.add(list(range(400)), vectors)
    hnsw = index._hnsw
    real_query = hnsw.knn_query
    calls = []

    class Stranded:  # reaches only 5 vectors, whatever the ef
        def __getattr__(self, name):
            return getattr(hnsw, name)

        def knn_query(self, query, k=1, num_threads=-1):
            calls.append((k, hnsw.ef))
            if k > 5:
                raise RuntimeError("Cannot return the results in a contiguous 2D array. Probably ef or M is too small")
            return real_query(query, k=k, num_threads=num_threads)

    index._hnsw = Stranded()
    found = index.search(vectors[7], 10)
    assert 1 <= len(found) <= 5 and found[0][0] == 7
    assert max(ef for _, ef in calls) == 400  # ef was raised before k was lowered
