"""The SQLite store: schema versioning, unreadable stores, integrity check, JSON export, pickle import."""

from __future__ import annotations

import json
import os
import pickle
import re
import sqlite3

import pytest
from m3mem_evidence import clip, face, match, voice
from reference_pickles import write_reference_pickle

from m3_memory.errors import SchemaVersionError, StoreError
from m3_memory.memory import Memory
from m3_memory.store.reference_import import UntrustedPickleError, import_reference, load_reference_pickle
from m3_memory.store.schema import SCHEMA_VERSION
from m3_memory.store.sqlite_store import DB_FILE, SCHEMA_FILE, MemoryStore


def test_new_store_layout(tmp_path):
    store = MemoryStore(str(tmp_path / "m"))
    assert json.loads((tmp_path / "m" / SCHEMA_FILE).read_text())["schema_version"] == SCHEMA_VERSION
    assert store.conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version == SCHEMA_VERSION
    assert store.integrity_check() == []
    store.close()


def test_newer_schema_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "m"
    MemoryStore(str(path)).close()
    conn = sqlite3.connect(path / DB_FILE)
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    before = (path / DB_FILE).read_bytes()
    with pytest.raises(SchemaVersionError, match="newer"):
        MemoryStore(str(path))
    assert (path / DB_FILE).read_bytes() == before
    # the schema.json file alone is enough to refuse
    other = tmp_path / "n"
    other.mkdir()
    (other / SCHEMA_FILE).write_text(json.dumps({"format": "m3_memory", "schema_version": SCHEMA_VERSION + 5}))
    with pytest.raises(SchemaVersionError):
        MemoryStore(str(other))
    assert not (other / DB_FILE).exists()


def test_unreadable_store(tmp_path):
    path = tmp_path / "m"
    path.mkdir()
    (path / DB_FILE).write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="unreadable"):
        MemoryStore(str(path))


def test_integrity_check_finds_damage_and_export(memory):
    memory.ingest(
        clip(0, faces=[face("face_1", 1, crop=b"\xff\xd8jpeg")], voices=[voice("voice_1", 2, 4, "I like tea")],
             matches=[match("face_1", "voice_1", 4)])
    )  # fmt: skip
    assert memory.store.integrity_check() == []
    data = memory.store.export_json()
    json.dumps(data)  # JSON-ready
    assert [c["clip_index"] for c in data["clips"]] == [0]
    assert {n["text"] for n in data["text_nodes"]} >= {"<face_1> is seen.", "<voice_1> likes tea."}
    assert data["aliases"] == [{"old_id": "person_2", "new_id": "person_1", "clip_index": 0, "reason": "equivalence"}]
    assert "embedding" not in data["text_nodes"][0]
    conn = memory.store.conn()
    conn.execute("DELETE FROM entities WHERE entity_id='person_1'")
    problems = memory.store.integrity_check()
    assert any("alias to unknown entity" in p for p in problems)
    assert any("face/voice without person" in p for p in problems)


# -- reference pickles ----------------------------------------------------------------------------
def test_reference_pickle_import(tmp_path, embedder):
    path = tmp_path / "video.pkl"
    write_reference_pickle(path)
    mem = Memory.open(str(tmp_path / "m"), embedder)
    with pytest.raises(UntrustedPickleError, match="trusted"):
        import_reference(mem, str(path))
    summary = import_reference(mem, str(path), trusted=True)
    assert (summary.clips, summary.memories, summary.faces, summary.voices) == (2, 3, 1, 1)
    stored = sorted(n.text for n in mem.graph.text.values())
    assert stored == [
        "<face_1> opens the fridge.",
        "<voice_1> says the milk is gone.",
        "Equivalence: <face_1>, <voice_1>",
    ]
    assert mem.store.integrity_check() == []
    mem.close()


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_restricted_unpickler_refuses_code(tmp_path):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(_Exploit()))
    with pytest.raises(UntrustedPickleError, match="allow-list"):
        load_reference_pickle(str(path), trusted=True)


@pytest.mark.parametrize(
    "opcodes, call",
    [
        (b"cbuiltins\nbytes\nJ\x00\x00\x10\x00\x85R.", "bytes(n)"),  # bytes(1 MiB)
        (b"cnumpy\nndarray\nK\x10\x85\x85R.", "numpy.ndarray directly"),  # ndarray((16,))
    ],
)
def test_restricted_unpickler_refuses_calls_that_allocate_a_declared_size(tmp_path, opcodes, call):
    """Allowed names, called with a size: a tiny pickle could ask for any amount of memory."""
    path = tmp_path / "alloc.pkl"
    path.write_bytes(b"\x80\x04" + opcodes)
    with pytest.raises(UntrustedPickleError, match=re.escape(call)):
        load_reference_pickle(str(path), trusted=True)


def test_saved_text_index_is_used_only_when_it_matches(tmp_path, embedder):
    from m3_agent.bench.memory import ingest, synthetic_texts

    path = str(tmp_path / "m")
    texts = synthetic_texts(400)
    mem = Memory.open(path, embedder)
    ingest(mem, texts[:300], 100, 40)
    expected = [(h.node_id, round(h.score, 5)) for h in mem.search.search_node("where is the passport", top_k=10)]
    mem.close()  # saves text_index.hnsw + text_index.json
    mem = Memory.open(path, embedder)
    assert mem.graph.text_index_loaded
    assert [
        (h.node_id, round(h.score, 5)) for h in mem.search.search_node("where is the passport", top_k=10)
    ] == expected
    ingest(mem, texts[300:], 100, 40)
    mem.store.close()  # a crash: the saved index is now behind the store
    mem = Memory.open(path, embedder)
    assert not mem.graph.text_index_loaded  # rebuilt from the store
    assert len(mem.graph.text_index) == 400
    newest = texts[350]  # written after the save: found only because the index was rebuilt
    hits = mem.search.search_node(newest, kinds=["episodic"], top_k=1)
    assert hits[0].text == newest and hits[0].score > 0.99
    assert mem.store.integrity_check() == []
    mem.close()


def test_wrong_size_embedding_is_a_clear_error_on_open(tmp_path, embedder):
    path = str(tmp_path / "m")
    mem = Memory.open(path, embedder)
    mem.ingest(clip(0, voices=[voice("voice_1", 2, 4, "I like tea")]))
    (node_id,) = mem.store.conn().execute("SELECT node_id FROM text_nodes LIMIT 1").fetchone()
    mem.close()
    with sqlite3.connect(os.path.join(path, DB_FILE)) as conn:
        conn.execute("UPDATE text_nodes SET embedding = zeroblob(12) WHERE node_id = ?", (node_id,))
    with pytest.raises(StoreError, match=rf"text node {node_id}: embedding of 12 bytes, not 1536"):
        Memory.open(path, embedder)
    with sqlite3.connect(os.path.join(path, DB_FILE)) as conn:  # refused, not rewritten
        assert conn.execute("SELECT length(embedding) FROM text_nodes WHERE node_id = ?", (node_id,)).fetchone() == (
            12,
        )
