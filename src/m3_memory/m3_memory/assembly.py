"""Open a Memory from parameter values (the node's and `m3 replay`'s), so both build it alike."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from m3_memory.clip_window import ClipWindows
from m3_memory.graph.memory_graph import GraphConfig
from m3_memory.memorize.common_words import common_words
from m3_memory.memory import Memory
from m3_memory.place.regions import Regions, RegionsError
from m3_memory.robot_ids import check_robot_id
from m3_memory.search.api import SearchConfig
from m3_memory.store.sqlite_store import MemoryStore


def memory_dir(p: Mapping[str, Any]) -> str:
    return os.path.abspath(os.path.expanduser(str(p["memory_dir"])))


def memory_location(p: Mapping[str, Any]) -> str:
    """Where the memory lives, for messages and stats: the directory, or the Milvus URI."""
    return str(p["milvus_uri"]) if p["memory_backend"] == "milvus" else memory_dir(p)


def graph_config(p: Mapping[str, Any]) -> GraphConfig:
    return GraphConfig(
        reinforce_threshold=p["reinforce_threshold"],
        weaken_threshold=p["weaken_threshold"],
        face_match_threshold=p["face_match_threshold"],
        voice_match_threshold=p["voice_match_threshold"],
        equivalence_min_confidence=p["equivalence_min_confidence"],
        equivalence_min_evidence=p["equivalence_min_evidence"],
    )


def search_config(p: Mapping[str, Any]) -> SearchConfig:
    return SearchConfig(
        max_query_chars=p["max_query_chars"], default_top_k=p["default_top_k"], robot_id=check_robot_id(p["robot_id"])
    )


def make_memorizer(p: Mapping[str, Any]):
    """None selects the rules memorizer (Memory builds it with the graph's equivalence thresholds)."""
    common_words()  # both memorizers read names with it: a missing word list fails configure, naming its package
    if p["memorizer"] == "rules":
        return None
    if p["memorizer"] == "openai":
        from m3_memory.memorize.openai_compatible import OpenAIMemorizer

        return OpenAIMemorizer(
            p["openai_endpoint"],
            p["openai_model"],
            p["openai_prompt_file"] or None,
            api_key_env=p["openai_api_key_env"],
            timeout_s=p["openai_timeout_s"],
            max_retries=p["openai_max_retries"],
            response_format=p["openai_response_format"],
            keyframes=p["openai_keyframes"],
            image_max_px=p["openai_image_max_px"],
            verbatim=bool(p["openai_verbatim"]),
            max_tokens=p["openai_max_tokens"],
            equivalence_min_confidence=p["equivalence_min_confidence"],
            equivalence_min_evidence=p["equivalence_min_evidence"],
        )
    raise ValueError(f"memorizer must be 'rules' or 'openai', got {p['memorizer']!r}")


def milvus_config(p: Mapping[str, Any]):
    from m3_memory.milvus.backend import MilvusConfig

    uri = str(p["milvus_uri"])
    if not uri.startswith(("http://", "https://", "tcp://", "grpc://")):
        uri = os.path.abspath(os.path.expanduser(uri))  # a local directory served by milvus-lite
    return MilvusConfig(
        uri=uri,
        collection_prefix=p["milvus_collection_prefix"],
        robot_id=p["robot_id"],
        index_type=p["milvus_index_type"],
        index_params=p["milvus_index_params"],
        search_params=p["milvus_search_params"],
        spool_dir=p["milvus_spool_dir"],
        spool_max_mb=p["milvus_spool_max_mb"],
        timeout_s=p["milvus_timeout_s"],
        fleet_slot=p["fleet_slot"],
        token_env=p["milvus_token_env"],
    )


def make_embedder(p: Mapping[str, Any]):
    from m3_memory.search.embedder import TextEmbedder

    return TextEmbedder(
        p["text_model_path"] or None,
        runtime=p["text_runtime"],
        onnx_cache_dir=p["text_onnx_cache_dir"] or None,
        threads=p["text_threads"],
    )


def load_regions(p: Mapping[str, Any]) -> Regions:
    """The named regions (regions_file; none when empty), after checking pose_type: RegionsError or ValueError
    for a bad file or setting, before the store is touched."""
    from m3_memory.pose_input import check_pose_type

    check_pose_type(p["pose_type"])
    path = str(p["regions_file"]).strip()
    regions = Regions.load(os.path.expanduser(path)) if path else Regions.empty(p["pose_frame_id"])
    if regions.frame_id != p["pose_frame_id"]:
        raise RegionsError(
            f"regions file {path} is in frame {regions.frame_id!r}, but pose_frame_id is {p['pose_frame_id']!r}"
        )
    return regions


def open_memory(p: Mapping[str, Any], embedder=None, memorizer=None, regions: Regions | None = None) -> Memory:
    """Open the back-end (memory_backend) and the embedder: the SQLite store first (a bad store is
    reported before models load); Milvus after the embedder (its collections need the dimension).

    memorizer, regions: built already with make_memorizer and load_regions (a bad setting should fail before
    the store is touched); None builds them here.
    """
    memorizer = memorizer if memorizer is not None else make_memorizer(p)
    regions = regions if regions is not None else load_regions(p)
    memory = _open_memory(p, embedder, memorizer, make_fact_reader(p, memorizer))
    memory.graph.regions = regions
    return memory


def make_fact_reader(p: Mapping[str, Any], memorizer):
    """The model reading the statements supersession compares (memorize/fact_reader.py), or None for
    the rules: fact_reader 'auto' takes the model wherever a model memorizes."""
    choice = p["fact_reader"]
    if choice not in ("auto", "rules", "model"):
        raise ValueError(f"fact_reader must be 'auto', 'rules' or 'model', got {choice!r}")
    has_model = hasattr(memorizer, "fact_reader")
    if choice == "model" and not has_model:
        raise ValueError("fact_reader 'model' needs memorizer 'openai' (its endpoint reads the statements)")
    return memorizer.fact_reader() if has_model and choice != "rules" else None


def _open_memory(p: Mapping[str, Any], embedder, memorizer, fact_reader) -> Memory:
    if p["memory_backend"] == "milvus":
        from m3_memory.milvus.backend import MilvusBackend

        embedder = embedder or make_embedder(p)
        backend = MilvusBackend(milvus_config(p), embedder.dim)
        try:
            return Memory(backend, embedder, graph_config(p), search_config(p), memorizer, fact_reader)
        except BaseException:
            backend.close()
            raise
    if p["memory_backend"] != "sqlite":
        raise ValueError(f"memory_backend must be 'sqlite' or 'milvus', got {p['memory_backend']!r}")
    store = MemoryStore(memory_dir(p))
    try:
        return Memory(store, embedder or make_embedder(p), graph_config(p), search_config(p), memorizer, fact_reader)
    except BaseException:
        store.close()
        raise


def keyframes_per_clip(p: Mapping[str, Any]) -> int:
    """Frames each clip window keeps: the vision memorizer's keyframes, at least the stored one."""
    return max(1, int(p["openai_keyframes"])) if p["memorizer"] == "openai" else 1


def clip_windows(p: Mapping[str, Any], first_index: int, origin_ns: int | None = None) -> ClipWindows:
    """The clip windows on the stream clock, with the stamp checks (max_stamp_jump_s)."""
    return ClipWindows(
        p["clip_seconds"], first_index, p["clip_close_delay"], origin_ns, keyframes_per_clip(p), p["max_stamp_jump_s"]
    )


def clip_ingester(p: Mapping[str, Any], memory: Memory, on_stored=None, log=None):
    """The worker that memorizes and stores closed clips beside perception (m3_memory.ingest_worker)."""
    from m3_memory.ingest_worker import ClipIngester

    return ClipIngester(memory, p["memorize_backlog"], p["memorize_retry_max_s"], on_stored, log)
