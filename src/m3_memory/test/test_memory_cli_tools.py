"""`m3 memory check | stats | export | import | import-reference` as subprocesses on real stores:
exit codes, JSON last lines, one-line errors (never a traceback), nothing created or changed by a
command that refuses."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess

import pytest
from reference_pickles import malformed_pickles, write_reference_pickle
from store_damage import CLIPS, NAMES, build_store, digest, flip_leaf

from m3_memory.memory import Memory
from m3_memory.store.schema import SCHEMA_VERSION
from m3_memory.store.sqlite_store import DB_FILE


def m3_memory(*args: str) -> tuple[int, dict | None, str]:
    """rc, the JSON last stdout line (None when there is none) and stderr; never a traceback."""
    result = subprocess.run(["m3", "memory", *args], capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    lines = result.stdout.strip().splitlines()
    return result.returncode, json.loads(lines[-1]) if lines else None, result.stderr


def one_error_line(stderr: str, *parts: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("m3 memory "), stderr
    for part in parts:
        assert part in lines[0], lines[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder) -> str:
    path = str(tmp_path_factory.mktemp("built") / "mem")
    build_store(path, embedder)
    return path


@pytest.fixture
def store(built, tmp_path) -> str:
    path = str(tmp_path / "mem")
    shutil.copytree(built, path)
    return path


def test_check_and_stats_of_a_healthy_store(store):
    rc, report, _ = m3_memory("check", store)
    assert (rc, report) == (0, {"ok": True, "memory_dir": store, "problems": []})
    rc, stats, _ = m3_memory("stats", store)
    assert rc == 0
    assert (stats["clips"], stats["faces"], stats["voices"], stats["persons"]) == (CLIPS, 3, 3, 3)
    assert stats["episodic"] == 2 * CLIPS and stats["schema_version"] == SCHEMA_VERSION
    assert sorted(stats["names"].values()) == sorted(NAMES)


def test_check_reports_a_flipped_page_and_repair_salvages_the_rest(store, tmp_path, embedder):
    flip_leaf(os.path.join(store, DB_FILE), "text_nodes")
    before = digest(store)
    rc, report, stderr = m3_memory("check", store)
    assert rc == 1 and not report["ok"] and any("page" in p for p in report["problems"])
    assert "--repair NEW_DIR" in stderr
    rc, stats, stderr = m3_memory("stats", store)  # a damaged store is refused, with what to do
    assert (rc, stats) == (2, None)
    one_error_line(stderr, "is damaged", f"m3 memory check {store}")

    out = str(tmp_path / "salvaged")
    rc, report, _ = m3_memory("check", store, "--repair", out)
    assert rc == 0, report
    repair = report["repair"]
    assert repair["output"] == out and repair["problems"] == []
    assert repair["tables"]["text_nodes"]["unreadable_rowid_gaps"]  # the damaged leaf's rows are lost ...
    assert repair["clips"] == CLIPS and 0 < repair["episodic"] < 2 * CLIPS  # ... the rest is kept
    assert digest(store) == before  # the damaged original is untouched
    rc, report, _ = m3_memory("check", out)
    assert (rc, report["ok"]) == (0, True)
    memory = Memory.open(out, embedder)  # the salvaged store serves searches
    try:
        assert memory.search.search_node("what does Alice like", top_k=3)
        assert memory.search.get_stats().clips == CLIPS
    finally:
        memory.close()

    rc, report, stderr = m3_memory("check", store, "--repair", out)  # never over an existing directory
    assert rc == 2
    one_error_line(stderr, "nothing was salvaged", "already exists")


def _zero_length(path) -> None:
    open(os.path.join(path, DB_FILE), "wb").close()


def _text_file(path) -> None:
    with open(os.path.join(path, DB_FILE), "w") as handle:
        handle.write("not a database\n" * 20)


def _foreign(path) -> None:
    os.remove(os.path.join(path, DB_FILE))
    with sqlite3.connect(os.path.join(path, DB_FILE)) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER)")
    conn.close()


@pytest.mark.parametrize(
    "make, message",
    [(_zero_length, "is empty (0 bytes)"), (_text_file, "not an SQLite database"), (_foreign, "not a memory store")],
    ids=["zero length", "text file", "foreign sqlite"],
)
def test_files_that_are_not_a_store_are_reported_never_reset(store, tmp_path, make, message):
    make(store)
    before = digest(store)
    for tool in ("check", "stats", "export"):
        rc, report, stderr = m3_memory(tool, store)
        assert rc == 2 and (report is None or report["ok"] is False), tool
        one_error_line(stderr, message, DB_FILE)
        assert digest(store) == before, tool  # not re-initialised, not written
    rc, _, stderr = m3_memory("check", store, "--repair", str(tmp_path / "out"))
    assert rc == 2 and not (tmp_path / "out").exists()


def test_export_import_round_trip(store, tmp_path, embedder):
    exported = tmp_path / "export.json"
    rc, summary, _ = m3_memory("export", store, "--embeddings", "-o", str(exported))
    assert (rc, summary["clips"], summary["embeddings"]) == (0, CLIPS, True)
    target = str(tmp_path / "imported")
    rc, report, _ = m3_memory("import", str(exported), target)
    assert rc == 0 and report["clips"] == CLIPS and sorted(report["names"].values()) == sorted(NAMES)
    again = tmp_path / "again.json"
    assert m3_memory("export", target, "--embeddings", "-o", str(again))[0] == 0
    assert json.loads(again.read_text()) == json.loads(exported.read_text())  # every row, vector and counter
    results = []
    for path in (store, target):  # the imported memory answers as the original does
        memory = Memory.open(path, embedder)
        try:
            hits = memory.search.search_node("what does Bob like", kinds=["episodic", "semantic"], top_k=5)
            results.append([(h.node_id, h.text, round(h.score, 5)) for h in hits])
        finally:
            memory.close()
    assert results[0] == results[1] and len(results[0]) == 5
    rc, _, stderr = m3_memory("import", str(exported), target)  # never into an existing store
    assert rc == 2
    one_error_line(stderr, "already exists")


def test_import_refuses_bad_exports_and_creates_nothing(store, tmp_path):
    plain = tmp_path / "plain.json"
    assert m3_memory("export", store, "-o", str(plain))[0] == 0
    data = json.loads(plain.read_text())
    full = tmp_path / "full.json"
    assert m3_memory("export", store, "--embeddings", "-o", str(full))[0] == 0
    wrong_type = json.loads(full.read_text())
    wrong_type["clips"][0]["start_ns"] = "yesterday"
    newer = {**data, "schema_version": 99}
    cases = {
        "no embeddings": (json.dumps(data), "holds no embeddings"),
        "truncated": (full.read_text()[:5000], "not readable JSON"),
        "wrong type": (json.dumps(wrong_type), "clips[0]: start_ns should be integer, got str"),
        "newer": (json.dumps(newer), "schema version 99"),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        target = tmp_path / "target" / name
        rc, _, stderr = m3_memory("import", str(path), str(target))
        assert rc == 2, name
        one_error_line(stderr, message)
        assert not (tmp_path / "target").exists(), name  # nor its parent


@pytest.mark.parametrize("name", sorted(malformed_pickles()))
def test_import_reference_refuses_malformed_pickles_and_creates_nothing(tmp_path, name):
    path = tmp_path / "graph.pkl"
    path.write_bytes(malformed_pickles()[name])
    target = tmp_path / "memory"
    rc, report, stderr = m3_memory("import-reference", str(path), str(target), "--trust-pickle")
    assert (rc, report) == (2, None)
    one_error_line(stderr, str(path))
    assert not target.exists()


def test_import_reference_into_a_new_directory(tmp_path):
    path = tmp_path / "graph.pkl"
    write_reference_pickle(path)
    target = tmp_path / "memory"
    rc, _, stderr = m3_memory("import-reference", str(path), str(target))  # not trusted: refused
    assert rc == 2 and not target.exists()
    one_error_line(stderr, "--trust-pickle")
    rc, summary, _ = m3_memory("import-reference", str(path), str(target), "--trust-pickle")
    assert (rc, summary) == (0, {"clips": 2, "memories": 3, "faces": 1, "voices": 1})
    rc, stats, _ = m3_memory("stats", str(target))
    assert (stats["clips"], stats["faces"], stats["voices"]) == (2, 1, 1)
