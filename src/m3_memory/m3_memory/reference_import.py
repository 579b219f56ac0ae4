"""Import a reference M3-Agent memory graph (a VideoGraph pickle) into the store.

Pickles can run arbitrary code when loaded, so this needs an explicit trust flag and even then
uses a restricted unpickler: only plain containers, numpy arrays and the reference's VideoGraph /
VideoGraph.Node classes (mapped onto inert stand-ins) can be constructed. plain pickle.load is
never used.
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass

import numpy as np

from m3_memory.graph import MemorizerOutput
from m3_memory.records import KIND_EPISODIC, KIND_SEMANTIC, ClipEvidence, MemoryDraft


class UntrustedPickleError(PermissionError):
    """Refused: the caller did not declare the pickle trusted, or it names a class not allowed."""


class _Inert:
    """Stand-in for the reference's classes: keeps the pickled attributes, runs no code."""

    def __setstate__(self, state) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict, slots)
            state = {**(state[0] or {}), **(state[1] or {})}
        if not isinstance(state, dict):
            raise UntrustedPickleError("unexpected object state in reference pickle")
        self.__dict__.update(state)


class RefVideoGraph(_Inert):
    pass


class RefNode(_Inert):
    pass


_ALLOWED = {
    ("builtins", "dict"): dict,
    ("builtins", "list"): list,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "tuple"): tuple,
    ("builtins", "int"): int,
    ("builtins", "float"): float,
    ("builtins", "str"): str,
    ("builtins", "bytes"): bytes,
    ("builtins", "complex"): complex,
    ("builtins", "object"): object,
    ("copyreg", "_reconstructor"): None,  # filled below with a guarded version
    ("collections", "OrderedDict"): None,
    ("collections", "defaultdict"): None,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): None,
    ("numpy._core.multiarray", "_reconstruct"): None,
    ("numpy.core.multiarray", "scalar"): None,
    ("numpy._core.multiarray", "scalar"): None,
    ("mmagent.videograph", "VideoGraph"): RefVideoGraph,
    ("mmagent.videograph", "VideoGraph.Node"): RefNode,
    ("videograph", "VideoGraph"): RefVideoGraph,
    ("videograph", "VideoGraph.Node"): RefNode,
}


def _guarded_reconstructor(cls, base, state):
    if cls not in (RefVideoGraph, RefNode) or base is not object:
        raise UntrustedPickleError(f"copyreg._reconstructor for {cls!r} is not allowed")
    return object.__new__(cls)


def _resolve_allowed() -> None:
    import collections

    from numpy.core import multiarray

    _ALLOWED[("copyreg", "_reconstructor")] = _guarded_reconstructor
    _ALLOWED[("collections", "OrderedDict")] = collections.OrderedDict
    _ALLOWED[("collections", "defaultdict")] = collections.defaultdict
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        _ALLOWED[(module, "_reconstruct")] = multiarray._reconstruct
        _ALLOWED[(module, "scalar")] = multiarray.scalar


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler whose find_class accepts only the allow-list above."""

    def find_class(self, module: str, name: str):
        if not _ALLOWED.get(("copyreg", "_reconstructor")):
            _resolve_allowed()
        target = _ALLOWED.get((module, name))
        if target is None:
            raise UntrustedPickleError(f"reference pickle names {module}.{name}, which is not on the allow-list")
        return target


def load_reference_pickle(path: str, trusted: bool = False) -> RefVideoGraph:
    """The reference VideoGraph in a pickle, through the restricted unpickler; trusted must be True."""
    if not trusted:
        raise UntrustedPickleError(
            f"refusing to read {path}: pickles can run code; pass trusted=True (CLI: --trust-pickle) only for "
            "files you made yourself"
        )
    with open(path, "rb") as handle:
        data = handle.read()
    graph = RestrictedUnpickler(io.BytesIO(data)).load()
    if not isinstance(graph, RefVideoGraph) or not isinstance(getattr(graph, "nodes", None), dict):
        raise ValueError(f"{path} does not hold a reference VideoGraph")
    return graph


@dataclass
class ImportSummary:
    clips: int
    memories: int
    faces: int
    voices: int


_REF_TAG = re.compile(r"<(face|voice)_(\d+)>")


def import_reference(memory, path: str, trusted: bool = False) -> ImportSummary:
    """Write a reference graph's clips into `memory` (an m3_memory.memory.Memory), one clip per
    transaction, after any clips already stored. Faces and voices become entities (their reference
    node numbers are rewritten to new ids in the memory texts); texts are re-embedded with MiniLM."""
    ref = load_reference_pickle(path, trusted)
    kinds = {"img": "face", "voice": "voice"}
    entity_nodes = sorted((nid, n) for nid, n in ref.nodes.items() if getattr(n, "type", "") in kinds)
    texts_by_clip: dict[int, list] = {}
    for _nid, node in sorted(ref.nodes.items()):
        if getattr(node, "type", "") in (KIND_EPISODIC, KIND_SEMANTIC):
            clip = int(node.metadata.get("timestamp", 0))
            texts_by_clip.setdefault(clip, []).append(node)
    graph = memory.graph
    base = memory.next_clip_index
    ref_to_new: dict[str, str] = {}
    with graph.ingest_lock:
        first_clip = min(texts_by_clip, default=0)
        for index, (ref_clip, nodes) in enumerate(sorted(texts_by_clip.items())):
            clip = ClipEvidence(base + index, 0, 0)
            new_here = []
            if ref_clip == first_clip:  # create every reference entity with the first clip
                for nid, node in entity_nodes:
                    new_here.append(f"{kinds[node.type]}_{nid}")
            predicted = graph.predict_new_ids(new_here)
            ref_to_new.update(predicted)

            def rewrite(text: str) -> str:
                return _REF_TAG.sub(
                    lambda m: f"<{ref_to_new.get(f'{m.group(1)}_{m.group(2)}', m.group(0)[1:-1])}>", text
                )

            drafts = []
            for node in nodes:
                contents = node.metadata.get("contents") or [""]
                text = rewrite(str(contents[0]))
                if text.strip():
                    drafts.append(MemoryDraft(node.type, text, 0, 0))
            if not drafts and not new_here:
                continue
            vectors = memory.embedder.embed([d.text for d in drafts]) if drafts else np.zeros((0, memory.embedder.dim))
            graph.apply_clip(clip, dict(predicted), MemorizerOutput(drafts=drafts), vectors, new_here)
            for perception_id in new_here:  # reference ids are not perception ids of this run
                graph.session_map.pop(perception_id, None)
    faces = sum(1 for _, n in entity_nodes if n.type == "img")
    return ImportSummary(
        len(texts_by_clip), sum(len(v) for v in texts_by_clip.values()), faces, len(entity_nodes) - faces
    )
