"""Reference M3-Agent VideoGraph pickles for tests, written with a stand-in of mmagent.videograph,
and malformed ones (what `m3 memory import-reference` must refuse with a clear error)."""

from __future__ import annotations

import pickle
import random
import struct
import sys
import types

import numpy as np

TEXTS = [
    ("episodic", "<face_0> opens the fridge.", 0),
    ("semantic", "Equivalence: <face_0>, <voice_1>", 0),
    ("episodic", "<voice_1> says the milk is gone.", 1),
]


def _reference_module() -> types.ModuleType:
    """A stand-in for the reference's mmagent.videograph with the same class layout."""
    module = types.ModuleType("mmagent.videograph")

    class VideoGraph:
        class Node:
            def __init__(self, node_id, node_type):
                self.id, self.type, self.embeddings, self.metadata = node_id, node_type, [], {}

        def __init__(self):
            self.nodes, self.edges, self.text_nodes, self.next_node_id = {}, {}, [], 0

    VideoGraph.__module__ = "mmagent.videograph"
    VideoGraph.__qualname__ = "VideoGraph"
    VideoGraph.Node.__module__ = "mmagent.videograph"
    VideoGraph.Node.__qualname__ = "VideoGraph.Node"
    module.VideoGraph = VideoGraph
    return module


def reference_pickle_bytes(metadata_of=None) -> bytes:
    """A pickled graph: a face, a voice and TEXTS; metadata_of(node id, default) may replace a
    text node's metadata (to make wrong field types)."""
    module = _reference_module()
    sys.modules.setdefault("mmagent", types.ModuleType("mmagent"))
    sys.modules["mmagent.videograph"] = module
    try:
        graph = module.VideoGraph()
        for nid, kind in ((0, "img"), (1, "voice")):
            node = module.VideoGraph.Node(nid, kind)
            node.embeddings = [np.ones(4, dtype=np.float32)]
            node.metadata = {"contents": ["crop"]}
            graph.nodes[nid] = node
        for nid, (kind, text, clip_id) in enumerate(TEXTS, start=2):
            node = module.VideoGraph.Node(nid, kind)
            node.metadata = {"contents": [text], "timestamp": clip_id}
            if metadata_of is not None:
                node.metadata = metadata_of(nid, node.metadata)
            graph.nodes[nid] = node
        return pickle.dumps(graph, protocol=4)
    finally:
        del sys.modules["mmagent.videograph"]


def write_reference_pickle(path) -> None:
    with open(path, "wb") as handle:
        handle.write(reference_pickle_bytes())


def malformed_pickles() -> dict[str, bytes]:
    """Named bytes that are not a usable reference graph."""
    good = reference_pickle_bytes()
    return {
        # BINBYTES8 declaring 2**60 bytes: the C unpickler allocates the declared size first
        "huge bytes": b"\x80\x04\x8e" + struct.pack("<Q", 2**60) + b"abc.",
        "wrong field types": reference_pickle_bytes(lambda nid, meta: "a string, not a dict" if nid == 3 else meta),
        "wrong timestamp": reference_pickle_bytes(lambda nid, meta: {**meta, "timestamp": "noon"}),
        "truncated": good[: len(good) // 2],
        "random bytes": random.Random(7).randbytes(4096),
        "not a graph": pickle.dumps({"nodes": {}}),
    }
