"""The memory node's parameters: name -> (default, descriptor). `m3 replay` reads them too, so a
replay builds its memory exactly as the node does (config/m3.yaml documents every value)."""

from __future__ import annotations

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

from m3_runtime.managed_node import AUTOSTART


def _float(description: str, low: float, high: float) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=description, floating_point_range=[FloatingPointRange(from_value=low, to_value=high, step=0.0)]
    )


def _int(description: str, low: int, high: int) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=description, integer_range=[IntegerRange(from_value=low, to_value=high, step=1)]
    )


def _text(description: str) -> ParameterDescriptor:
    return ParameterDescriptor(description=description)


PARAMETERS = {
    "autostart": AUTOSTART,
    "memory_dir": ("~/.m3/memory", _text("memory directory (SQLite store + schema.json); ~ is expanded")),
    "memory_backend": ("sqlite", _text("storage back-end: 'sqlite' (memory_dir) or 'milvus' (milvus_uri)")),
    "milvus_uri": (
        "http://127.0.0.1:19530",
        _text("memory_backend milvus: http://host:19530 (a Milvus server), or a local directory served by milvus-lite"),
    ),
    "milvus_collection_prefix": ("m3", _text("memory_backend milvus: collections <prefix>_text and <prefix>_records")),
    "milvus_index_type": (
        "HNSW",
        _text("memory_backend milvus: index type of the text vectors (HNSW, IVF_FLAT, FLAT)"),
    ),
    "milvus_index_params": ('{"M": 16, "efConstruction": 200}', _text("memory_backend milvus: index params (JSON)")),
    "milvus_search_params": ('{"ef": 128}', _text("memory_backend milvus: search params of the text index (JSON)")),
    "milvus_token_env": (
        "MILVUS_TOKEN",
        _text("memory_backend milvus: environment variable holding the server's token (user:password); unset: none"),
    ),
    "milvus_timeout_s": (5, _int("memory_backend milvus: longest Milvus call before a clip is buffered [s]", 1, 600)),
    "milvus_spool_dir": (
        "",
        _text("memory_backend milvus: where clips wait while Milvus is unreachable (empty = ~/.m3/milvus_spool/...)"),
    ),
    "milvus_spool_max_mb": (
        256.0,
        _float("memory_backend milvus: largest on-disk buffer of unsent clips; then clips are refused [MiB]", 1.0, 1e6),
    ),
    "fleet_slot": (
        0,
        _int("memory_backend milvus: 1..999 = a fleet member (people shared, ids n*1000+slot); 0 = alone", 0, 999),
    ),
    "robot_id": (
        "robot",
        _text("this robot's id, on every Milvus row and search result: 1-64 of [A-Za-z0-9_.-], not 'fleet'"),
    ),
    "clip_seconds": (30.0, _float("length of a clip window on the stream clock [s]", 1.0, 3600.0)),
    "clip_close_delay": (2.0, _float("wait this long past a window's end for late utterances [s]", 0.0, 60.0)),
    "clip_idle_close_s": (
        10.0,
        _float("the open clip closes after this long with no input at all (the stream stopped) [s]", 0.1, 86400.0),
    ),
    "memorizer": ("rules", _text("memorizer back-end: 'rules' (offline, deterministic) or 'openai'")),
    "openai_endpoint": ("", _text("OpenAI-compatible base URL for memorizer 'openai', e.g. http://localhost:8000/v1")),
    "openai_model": ("", _text("model name for memorizer 'openai'")),
    "openai_prompt_file": ("", _text("prompt file for memorizer 'openai' (empty = the packaged prompt)")),
    "openai_api_key_env": ("OPENAI_API_KEY", _text("environment variable holding the API key (unset: none sent)")),
    "openai_timeout_s": (60.0, _float("timeout of one memorizer request [s]", 1.0, 3600.0)),
    "openai_max_retries": (3, _int("attempts per request round before the memorizer reports a failure", 1, 20)),
    "openai_response_format": (
        "json_object",
        _text("reply constraint: json_object (+schema: llama.cpp servers), json_schema (vLLM, llama-server) or none"),
    ),
    "openai_keyframes": (0, _int("keyframes of each clip sent to a vision model (0: text-only, no images)", 0, 32)),
    "openai_image_max_px": (512, _int("longest side of an image sent to the model [px]", 64, 4096)),
    "openai_verbatim": (True, _text("store who was seen and what was said as is; the model adds names and facts")),
    "fact_reader": (
        "auto",
        _text("who reads statements for superseding: 'auto' (the model with memorizer openai), 'rules', 'model'"),
    ),
    "openai_max_tokens": (512, _int("longest reply of the memorization model [tokens]", 16, 32768)),
    "memorize_backlog": (16, _int("closed clips that may wait for the memorizer before intake blocks", 1, 10000)),
    "memorize_retry_max_s": (30.0, _float("longest wait between retries of an unreachable memorizer [s]", 0.1, 3600.0)),
    "memorize_drain_s": (
        120.0,
        _float("at shutdown, wait this long for the memorizer; then the rest is stored degraded [s]", 0.0, 86400.0),
    ),
    "text_model_path": ("", _text("sentence-transformers model dir (empty = packaged all-MiniLM-L6-v2)")),
    "text_runtime": ("onnxruntime", _text("text embedder runtime: 'onnxruntime' (its ONNX export) or 'torch'")),
    "text_onnx_cache_dir": ("", _text("where the text model's ONNX export is kept (empty = ~/.cache/m3-agent/models)")),
    "text_threads": (0, _int("intra-op threads of the text embedder (0 = the runtime's default)", 0, 256)),
    "reinforce_threshold": (
        0.85,
        _float("cosine above which a semantic memory reinforces one about the same entities", -1.0, 1.0),
    ),
    "weaken_threshold": (
        0.0,
        _float("cosine below which a semantic memory weakens one about the same entities", -1.0, 1.0),
    ),
    "face_match_threshold": (
        0.93,
        _float("cosine for a new perception face id to join a stored face entity", -1.0, 1.0),
    ),
    "voice_match_threshold": (
        0.6,
        _float("cosine for a new run's voice id to join a stored voice (campplus 0.6, resemblyzer 0.85)", -1.0, 1.0),
    ),
    "equivalence_min_confidence": (0.5, _float("EntityMatch confidence needed to unite two persons", 0.0, 1.0)),
    "equivalence_min_evidence": (1, _int("EntityMatch evidence_count needed to unite two persons", 1, 1000000)),
    "max_query_chars": (1000, _int("longest accepted text query [chars]", 1, 100000)),
    "default_top_k": (10, _int("search_node top_k used by the plain API when none is given", 1, 100)),
    "keyframe_topic": (
        "",
        _text("camera topic (sensor_msgs/Image) whose first frame per clip is kept as a JPEG; empty = off"),
    ),
    "max_image_pixels": (
        40_000_000,
        _int("larger search_node query images and keyframes are refused before decoding [pixels]", 1, 2**30),
    ),
    "max_query_audio_s": (60.0, _float("longest search_node voice sample [s]", 1.0, 3600.0)),
    "publish_hri": (
        "auto",
        _text("REP-155 /humans/persons/... output: 'auto' (when hri_msgs is installed), 'enabled' or 'disabled'"),
    ),
    "pose_topic": (
        "",
        _text("the robot's pose on the stream clock (e.g. /amcl_pose, /odom); empty = memories have no place"),
    ),
    "pose_type": (
        "pose_with_covariance_stamped",
        _text("message type of pose_topic: pose_stamped, pose_with_covariance_stamped or odometry"),
    ),
    "pose_wait_s": (
        1.0,
        _float("a closed clip waits this long for a pose at or past its end, then is stored without it [s]", 0.0, 60.0),
    ),
    "pose_frame_id": ("map", _text("frame poses must be in (others are dropped, with a warning); regions use it")),
    "regions_file": ("", _text("YAML file of named regions in pose_frame_id (m3_memory.place.regions); empty = none")),
    "max_stamp_jump_s": (
        3600.0,
        _float("evidence stamped further than this from the stream's time is dropped [s]", 1.0, 1.0e9),
    ),
}
