"""The command-line helpers over a memory directory (export, check), called in-process."""

from __future__ import annotations

import json
import sqlite3

from m3mem_evidence import clip, face, voice
from store_damage import build_store, digest, flip_leaf

from m3_memory.store.tools import check_main, export_main


def test_export_and_check(memory, tmp_path, capsys):
    memory.ingest(clip(0, faces=[face("face_1", 1)], voices=[voice("voice_1", 2, 3, "I like tea")]))
    memory_dir = memory.store.memory_dir
    assert check_main([memory_dir]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report == {"ok": True, "memory_dir": memory_dir, "problems": []}
    out = tmp_path / "export.json"
    assert export_main([memory_dir, "-o", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (summary["clips"], summary["text_nodes"]) == (1, 3)
    assert {n["text"] for n in json.loads(out.read_text())["text_nodes"]} == {
        "<face_1> is seen.", '<voice_1> says: "I like tea"', "<voice_1> likes tea."
    }  # fmt: skip
    conn = sqlite3.connect(f"{memory_dir}/memory.sqlite3")
    conn.execute("DELETE FROM entities WHERE kind='person'")
    conn.commit()
    conn.close()
    assert check_main([memory_dir]) == 1
    assert "face/voice without person" in capsys.readouterr().out
    assert check_main([str(tmp_path / "nothing")]) == 2
    assert export_main([str(tmp_path / "nothing")]) == 2


def test_check_reports_a_damaged_page_instead_of_raising(tmp_path, embedder, capsys):
    """The check used to die with sqlite3.DatabaseError on the store it was meant to diagnose."""
    memory_dir = str(tmp_path / "mem")
    flip_leaf(build_store(memory_dir, embedder, clips=6), "text_nodes")
    before = digest(memory_dir)
    assert check_main([memory_dir]) == 1
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert not report["ok"] and any("database disk image is malformed" in p for p in report["problems"])
    assert digest(memory_dir) == before
