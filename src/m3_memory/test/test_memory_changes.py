"""Facts that change: a newer memory that says where a thing now is, or moves an event, marks the older
statement superseded (kept, with when it stopped being true and what replaced it), on both back-ends; a search
as of a time prefers what was true then."""

from __future__ import annotations

import pytest
from m3mem_evidence import S, clip, voice
from memory_backends import open_memory

BACKENDS = ("sqlite", "milvus")


@pytest.fixture
def changed(request, tmp_path, embedder, backend_name):
    server = request.getfixturevalue("milvus_server") if backend_name == "milvus" else None
    memory = open_memory(backend_name, str(tmp_path / "m"), embedder, server)
    memory.ingest(clip(0, voices=[voice("voice_1", 10, 13, "I put the keys in the kitchen drawer")]))
    memory.ingest(clip(1, voices=[voice("voice_1", 40, 43, "the team meeting is on Thursday")]))
    memory.ingest(clip(2, voices=[voice("voice_2", 70, 73, "I moved the keys to the shelf in the hall")]))
    memory.ingest(clip(3, voices=[voice("voice_1", 100, 103, "the team meeting was moved to Friday")]))
    yield memory, backend_name, server, tmp_path
    memory.close()


def said(memory, words: str, kind: str = "episodic"):
    return next(n for n in memory.graph.text.values() if words in n.text and n.kind == kind)


def test_the_older_statement_is_kept_and_marked_replaced(changed):
    memory = changed[0]
    drawer, shelf = said(memory, "kitchen drawer"), said(memory, "shelf in the hall")
    assert (drawer.superseded_by, drawer.valid_until_ns) == (shelf.node_id, 70 * S)
    assert shelf.superseded_by == "" and shelf.valid_until_ns == 0
    thursday, friday = said(memory, "on Thursday"), said(memory, "moved to Friday")
    assert (thursday.superseded_by, thursday.valid_until_ns) == (friday.node_id, 100 * S)
    assert len(memory.graph.text) >= 4  # nothing deleted


def test_a_search_prefers_what_was_true_at_its_time(changed):
    search = changed[0].search
    now = search.search_node("where are the keys", kinds=["episodic"], top_k=5)
    assert "shelf" in now[0].text and now[0].superseded_by == ""
    old = next(h for h in now if "drawer" in h.text)
    assert old.superseded_by and old.valid_until_ns == 70 * S
    then = search.search_node("where are the keys", kinds=["episodic"], top_k=5, before_stamp_ns=50 * S)
    assert "drawer" in then[0].text and then[0].superseded_by == ""  # the move was not known at 50 s
    assert not any("shelf" in h.text for h in then)


def test_validity_survives_reopening(changed, embedder):
    memory, backend_name, server, tmp_path = changed
    before = {n.node_id: (n.valid_until_ns, n.superseded_by) for n in memory.graph.text.values()}
    assert any(by for _, by in before.values())
    prefix = memory.graph.backend.config.collection_prefix if backend_name == "milvus" else None
    memory.close()
    reopened = open_memory(backend_name, str(tmp_path / "m"), embedder, server, prefix=prefix)
    try:
        assert {n.node_id: (n.valid_until_ns, n.superseded_by) for n in reopened.graph.text.values()} == before
        if backend_name == "sqlite":
            rows = reopened.graph.backend.store.export_json()["validity"]
            assert {r["node_id"]: (r["valid_until_ns"], r["superseded_by"]) for r in rows} == {
                k: v for k, v in before.items() if v[1]
            }
    finally:
        reopened.close()
    changed[0].graph.backend = reopened.graph.backend  # the fixture's close is then a no-op on a closed back-end
