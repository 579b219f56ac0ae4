"""Real stores for damage tests: one built by the memory itself, then bytes flipped inside a page.

The page to damage is found by walking the table's b-tree in the file (SQLite's file format: a
table interior page has type 0x05 and child page numbers, a leaf 0x0D), so the damage lands in one
leaf of the chosen table whatever the layout, and the rest of the store stays readable.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3

from m3mem_evidence import clip, face, match, voice

from m3_memory.memory import Memory
from m3_memory.store.sqlite_store import DB_FILE

CLIPS = 12
NAMES = ("Alice", "Bob", "Carol")


def build_store(memory_dir: str, embedder, clips: int = CLIPS) -> str:
    """A closed store of `clips` clips (three people, each seen with a crop, heard saying their name
    once and then what they like); returns its db path."""
    memory = Memory.open(memory_dir, embedder)
    try:
        for i in range(clips):
            n = i % 3 + 1
            t = i * 30.0
            memory.ingest(
                clip(
                    i,
                    faces=[face(f"face_{n}", t + 1, crop=bytes([0xFF, 0xD8]) + bytes(range(256)) * 8)],
                    voices=[
                        voice(f"voice_{n}", t + 2, t + 4, f"My name is {NAMES[n - 1]}" if i < 3 else f"I like tea {i}")
                    ],
                    matches=[match(f"face_{n}", f"voice_{n}", t + 4)],
                )
            )
    finally:
        memory.close()
    return os.path.join(memory_dir, DB_FILE)


def leaf_pages(db_path: str, table: str) -> list[int]:
    """The leaf pages of a table's b-tree, left to right."""
    with sqlite3.connect(db_path) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
    conn.close()
    with open(db_path, "rb") as handle:
        data = handle.read()
    page_size = int.from_bytes(data[16:18], "big")

    def walk(page: int) -> list[int]:
        start = (page - 1) * page_size
        header = start + (100 if page == 1 else 0)
        if data[header] == 0x0D:
            return [page]
        assert data[header] == 0x05, f"page {page} is not a table b-tree page"
        cells = int.from_bytes(data[header + 3 : header + 5], "big")
        children = []
        for i in range(cells):
            pointer = int.from_bytes(data[header + 12 + 2 * i : header + 14 + 2 * i], "big")
            children.append(int.from_bytes(data[start + pointer : start + pointer + 4], "big"))
        children.append(int.from_bytes(data[header + 8 : header + 12], "big"))
        return [leaf for child in children for leaf in walk(child)]

    return walk(root)


def flip_leaf(db_path: str, table: str, index: int = 1) -> int:
    """Flip every bit of the cell pointer array of one leaf of `table` (not the file header);
    returns the page number."""
    page = leaf_pages(db_path, table)[index]
    with open(db_path, "r+b") as handle:
        handle.seek(16)
        page_size = int.from_bytes(handle.read(2), "big")
        start = (page - 1) * page_size
        handle.seek(start + 3)
        cells = int.from_bytes(handle.read(2), "big")
        handle.seek(start + 8)
        pointers = handle.read(2 * cells)
        handle.seek(start + 8)
        handle.write(bytes(b ^ 0xFF for b in pointers))
    return page


def digest(memory_dir: str) -> dict[str, str]:
    """sha256 of each file that holds the store's data (SQLite's -wal/-shm side files excluded)."""
    out = {}
    for name in sorted(os.listdir(memory_dir)):
        path = os.path.join(memory_dir, name)
        if os.path.isfile(path) and not name.endswith(("-wal", "-shm")):
            with open(path, "rb") as handle:
                out[name] = hashlib.sha256(handle.read()).hexdigest()
    return out
