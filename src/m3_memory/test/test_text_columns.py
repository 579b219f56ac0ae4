"""TextColumns: rows written into arrays that grow, windows equal to a plain Python filter."""

from __future__ import annotations

import math
import random
import threading

import numpy as np

from m3_memory.graph.columns import TextColumns
from m3_memory.graph.records import Place, TextNode


def node(seq: int, start: int, end: int, place: Place | None) -> TextNode:
    return TextNode(f"episodic_{seq}", seq, "episodic", "t", 0, start, end, 1.0, place=place)


def random_nodes(count: int, seed: int = 3) -> list[TextNode]:
    rng = random.Random(seed)
    out = []
    for seq in range(1, count + 1):
        start = rng.randrange(0, 10_000)
        place = (
            None if rng.random() < 0.2 else Place(rng.choice(["map", "odom"]), rng.uniform(-5, 5), rng.uniform(-5, 5))
        )
        out.append(node(seq, start, start + rng.randrange(0, 500), place))
    return out


def expected(nodes, after=0, before=0, box=None, frame=""):
    keep = []
    for n in nodes:
        if (after and n.end_ns < after) or (before and n.start_ns > before):
            continue
        if box is not None:
            p = n.place
            if p is None or p.frame_id != frame or not (box[0] <= p.x <= box[2] and box[1] <= p.y <= box[3]):
                continue
        keep.append(n.seq)
    return keep


def test_windows_match_a_plain_filter_across_growth():
    cols = TextColumns(capacity=4)  # grows several times
    nodes = random_nodes(1500)
    for i, n in enumerate(nodes, 1):
        cols.add(n)
        if i in (3, 4, 5, 700, 1500):  # windows between additions see exactly the rows added so far
            assert cols.window(after_ns=2000, before_ns=6000).tolist() == expected(nodes[:i], 2000, 6000)
    assert len(cols) == 1500 and cols.seq.tolist() == [n.seq for n in nodes]
    box = (-1.0, -2.0, 2.5, 3.0)
    assert cols.window(box=box, frame_id="map").tolist() == expected(nodes, box=box, frame="map")
    assert cols.window(after_ns=5000, box=box, frame_id="odom").tolist() == expected(nodes, 5000, 0, box, "odom")
    assert cols.window(box=box, frame_id="base_link").tolist() == []  # a frame no memory has
    assert np.isnan(cols.x[[n.place is None for n in nodes]]).all()


def test_a_view_taken_before_growth_keeps_its_rows():
    cols = TextColumns(capacity=2)
    for n in random_nodes(2):
        cols.add(n)
    before = cols.end_ns
    for n in random_nodes(50, seed=4):
        cols.add(n)
    assert len(before) == 2 and before.tolist() == [n.end_ns for n in random_nodes(2)]


def test_adding_while_windows_are_read_from_other_threads():
    cols, nodes, errors = TextColumns(capacity=8), random_nodes(3000), []

    def read():
        for _ in range(200):
            seqs = cols.window(after_ns=1)
            if len(seqs) and not (np.diff(seqs) > 0).all():
                errors.append(seqs)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    for n in nodes:
        cols.add(n)
    for t in readers:
        t.join()
    assert not errors
    assert cols.window().tolist() == [n.seq for n in nodes]


def clip_ordered_nodes(count: int, seed: int = 5) -> list[TextNode]:
    """Memories as a robot stores them: clip after clip of 30 s, each memory's time somewhere in its clip,
    so times are in order between clips and not within one; every 7th has no place."""
    rng = random.Random(seed)
    out = []
    for seq in range(1, count + 1):
        clip_start = (seq // 10) * 30_000
        start = clip_start + rng.randrange(0, 30_000)
        place = None if seq % 7 == 0 else Place("map", rng.uniform(-20, 20), rng.uniform(-20, 20))
        out.append(node(seq, start, start + rng.randrange(0, 5_000), place))
    return out


def test_time_windows_are_cut_to_the_rows_that_can_overlap_and_miss_none():
    nodes = clip_ordered_nodes(3000)
    late = node(3001, 500, 40_000, None)  # stored last, it started before almost everything (an import)
    everything = [*nodes, late]
    cols = TextColumns(capacity=8)
    for n in everything:
        cols.add(n)
    for after, before in ((0, 0), (1, 0), (0, 1), (600_000, 0), (0, 600_000), (4_000_000, 4_300_000), (30_000, 31_000)):
        assert cols.window(after_ns=after, before_ns=before).tolist() == expected(everything, after, before)
    assert 3001 in cols.window(after_ns=20_000, before_ns=35_000).tolist()  # the late one overlaps it
    assert cols.window(after_ns=10**12).tolist() == [] and cols.window(before_ns=1).tolist() == []


def test_a_circle_keeps_what_a_distance_test_keeps():
    nodes = clip_ordered_nodes(2000)
    cols = TextColumns()
    for n in nodes:
        cols.add(n)
    cx, cy, radius = 3.0, -4.0, 6.5
    box = (cx - radius, cy - radius, cx + radius, cy + radius)
    want = [
        seq
        for seq in expected(nodes, 0, 0, box, "map")
        if math.hypot(nodes[seq - 1].place.x - cx, nodes[seq - 1].place.y - cy) <= radius
    ]
    got = cols.window(box=box, frame_id="map", circle=(cx, cy, radius)).tolist()
    assert got == want and 0 < len(want) < len(expected(nodes, 0, 0, box, "map"))


def test_a_box_over_many_cells_or_an_infinite_one_is_tested_row_by_row_alike():
    nodes = clip_ordered_nodes(1200)
    cols = TextColumns()
    for n in nodes:
        cols.add(n)
    for box in ((-1e6, -1e6, 1e6, 1e6), (-np.inf, -3.0, np.inf, 3.0), (0.5, 0.5, 0.7, 0.7), (-21.0, -21.0, 21.0, 21.0)):
        assert cols.window(box=box, frame_id="map").tolist() == expected(nodes, 0, 0, box, "map")
    assert cols.window(after_ns=900_000, box=(-4.0, -4.0, 4.0, 4.0), frame_id="map").tolist() == expected(
        nodes, 900_000, 0, (-4.0, -4.0, 4.0, 4.0), "map"
    )
