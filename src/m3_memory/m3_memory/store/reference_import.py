"""Import a reference M3-Agent memory graph (a VideoGraph pickle) into the store.

Pickles can run arbitrary code when loaded, so this needs an explicit trust flag and even then
uses a restricted unpickler: only plain containers, numpy arrays and the reference's VideoGraph /
VideoGraph.Node classes (mapped onto inert stand-ins) can be constructed. plain pickle.load is
never used.
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
import re
import struct
from dataclasses import dataclass

import numpy as np

from m3_memory.graph.memory_graph import MemorizerOutput
from m3_memory.graph.records import KIND_EPISODIC, KIND_SEMANTIC, ClipEvidence, MemoryDraft

MAX_PICKLE_BYTES = 1 << 30  # --max-bytes default: a pickle is read whole into memory before unpickling
# What unpickling untrusted bytes can raise besides our own errors (the pickle module documents
# "other exceptions", among them AttributeError, EOFError, ImportError and IndexError).
_UNPICKLING_ERRORS = (
    pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
    OverflowError, MemoryError, RecursionError, struct.error,
)  # fmt: skip


class UntrustedPickleError(PermissionError):
    """Refused: the caller did not declare the pickle trusted, or it names a class not allowed."""


class ReferencePickleError(ValueError):
    """The file is not a usable reference VideoGraph pickle; the message names what is wrong."""


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


class RefArray(np.ndarray):
    """What numpy arrays in a reference pickle become: built only from their pickled bytes
    (multiarray._reconstruct does not call __new__), never by a call with a shape to allocate."""

    def __new__(cls, *args, **kwargs):
        raise UntrustedPickleError("reference pickle calls numpy.ndarray directly, which is not allowed")


def _guarded_bytes(*args):
    """bytes() as pickles use it (bytes(), bytes(text, encoding)); bytes(n) would allocate n bytes."""
    if args and isinstance(args[0], int):
        raise UntrustedPickleError("reference pickle calls bytes(n), which is not allowed")
    return bytes(*args)


_ALLOWED = {
    ("builtins", "dict"): dict,
    ("builtins", "list"): list,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "tuple"): tuple,
    ("builtins", "int"): int,
    ("builtins", "float"): float,
    ("builtins", "str"): str,
    ("builtins", "bytes"): _guarded_bytes,
    ("builtins", "complex"): complex,
    ("builtins", "object"): object,
    ("copyreg", "_reconstructor"): None,  # filled below with a guarded version
    ("collections", "OrderedDict"): None,
    ("collections", "defaultdict"): None,
    ("numpy", "ndarray"): RefArray,
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


def load_reference_pickle(path: str, trusted: bool = False, max_bytes: int = MAX_PICKLE_BYTES) -> RefVideoGraph:
    """The reference VideoGraph in a pickle, through the restricted unpickler; trusted must be True.

    Before unpickling, the file's size is checked against max_bytes and its opcodes are walked
    (pickletools.genops), so a declared length beyond the file is refused before any allocation.
    Raises UntrustedPickleError, ReferencePickleError (naming what is wrong) or OSError."""
    if not trusted:
        raise UntrustedPickleError(
            f"refusing to read {path}: pickles can run code; pass trusted=True (CLI: --trust-pickle) only for "
            "files you made yourself"
        )
    size = os.path.getsize(path)
    if size > max_bytes:
        raise ReferencePickleError(f"{path} is {size} bytes, more than the limit of {max_bytes} (--max-bytes)")
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    try:
        for _ in pickletools.genops(io.BytesIO(data)):
            pass
        graph = RestrictedUnpickler(io.BytesIO(data)).load()
    except _UNPICKLING_ERRORS as error:
        raise ReferencePickleError(f"{path} is not a readable pickle: {type(error).__name__}: {error}") from error
    validate_reference_graph(graph, path)
    return graph


def validate_reference_graph(graph, path: str) -> None:
    """Check every field the import reads, so a wrong type is a clear error naming the node."""
    if not isinstance(graph, RefVideoGraph) or not isinstance(getattr(graph, "nodes", None), dict):
        raise ReferencePickleError(f"{path} does not hold a reference VideoGraph with a nodes dict")
    for nid, node in graph.nodes.items():
        where = f"{path}: node {nid!r}"
        if not isinstance(nid, int) or isinstance(nid, bool) or nid < 0:
            raise ReferencePickleError(f"{where}: node ids must be non-negative integers")
        if not isinstance(node, RefNode) or not isinstance(getattr(node, "type", None), str):
            raise ReferencePickleError(f"{where}: not a VideoGraph.Node with a string type")
        if node.type not in (KIND_EPISODIC, KIND_SEMANTIC):
            continue
        metadata = getattr(node, "metadata", None)
        if not isinstance(metadata, dict):
            raise ReferencePickleError(f"{where}: metadata is {type(metadata).__name__}, not a dict")
        stamp = metadata.get("timestamp", 0)
        if not isinstance(stamp, (int, np.integer)) or isinstance(stamp, bool) or not 0 <= stamp < 2**31:
            raise ReferencePickleError(f"{where}: timestamp (the clip id) must be an integer 0..2**31, not {stamp!r}")
        contents = metadata.get("contents") or [""]
        if not isinstance(contents, (list, tuple)) or not isinstance(contents[0], str):
            raise ReferencePickleError(f"{where}: contents must be a list of strings")


@dataclass
class ImportSummary:
    clips: int
    memories: int
    faces: int
    voices: int


_REF_TAG = re.compile(r"<(face|voice)_(\d+)>")


def import_reference(memory, path: str, trusted: bool = False) -> ImportSummary:
    """Read the pickle at path (load_reference_pickle) and import it into memory."""
    return import_reference_graph(memory, load_reference_pickle(path, trusted))


def import_reference_graph(memory, ref: RefVideoGraph) -> ImportSummary:
    """Write a checked reference graph's clips into `memory` (an m3_memory.memory.Memory), one clip per
    transaction, after any clips already stored. Faces and voices become entities (their reference
    node numbers are rewritten to new ids in the memory texts); texts are re-embedded with MiniLM."""
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
