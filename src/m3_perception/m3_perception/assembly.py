"""Build the face and voice pipelines from parameter values (the node's and `m3 replay`'s).

Models load here, so a missing file fails with its name (ModelFileMissing). Back-ends are chosen
by parameter (face_backend, speaker_backend, asr_backend); nothing falls back silently.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from m3_perception.face_voice_matcher import FaceVoiceMatcher, MatcherParams
from m3_perception.faces.face_encoder import FaceEncoder
from m3_perception.faces.pipeline import FaceParams, FacePipeline
from m3_perception.identity_clusters import cosine_to_l2
from m3_perception.speech.pocketsphinx_asr import Transcriber
from m3_perception.speech.utterances import SegmenterParams
from m3_perception.voices.face_split import FaceSplitParams
from m3_perception.voices.pipeline import VoiceParams, VoicePipeline
from m3_perception.voices.revision import RevisionParams
from m3_perception.voices.speaker_activity import ActivityParams
from m3_perception.voices.speaker_turns import TurnParams

ASR_BACKENDS = ("faster_whisper", "pocketsphinx", "openai", "whisper", "none")
FACE_BACKENDS = ("dlib", "insightface")
# Suggested face_match_distance per back-end (README, Thresholds). dlib: L2 between unit 128-d
# embeddings, measured here. insightface: cosine distance (1 - cosine) between ArcFace embeddings;
# 0.7 is the reference system's "cosine >= 0.3 joins a face" (not measured here: no weights).
FACE_MATCH_DISTANCE = {"dlib": 0.40, "insightface": 0.70}
SPEAKER_BACKENDS = ("campplus", "resemblyzer", "eres2netv2")
DEFAULT_SPEAKER_BACKEND = "campplus"  # node_parameters' speaker_backend default
# Suggested thresholds per speaker back-end (README, Thresholds). campplus and resemblyzer: measured
# here on real read speech (real_speech.py: LibriVox reader, two_cities, beckett, clone-test, cards,
# goforward). CAM++ cosines: whole utterances of one speaker 0.54-0.95 (with the speaker's other
# utterances' centroid ≥ 0.75), of different speakers ≤ 0.34; 2 s pieces same p1 0.50, different
# ≤ 0.31 → 0.45. resemblyzer: same 0.64-0.93, different up to 0.70 (they overlap; 0.75 was chosen
# on synthetic voices). eres2netv2: the reference system's "voice cosine >= 0.6 joins a voice"
# (not measured here: no weights). Both CAM++ figures leave out two_cities–beckett, which CAM++
# puts 0.75 apart (whole recordings), far above every other pair: very likely one reader (so the
# conversations no longer count beckett as a speaker of their own, real_speech.conversation_sources).
VOICE_MATCH_COSINE = {"campplus": 0.45, "resemblyzer": 0.75, "eres2netv2": 0.60}
# turn_change_cosine: adjacent 1 s windows of one speaker (CAM++ min 0.30, p1 0.32; resemblyzer
# min 0.62) against windows of different speakers (CAM++ p95 0.20, max 0.36; resemblyzer up to
# 0.73). turn_merge_cosine: pieces of one speaker, as for VOICE_MATCH_COSINE. eres2netv2: not measured.
TURN_CHANGE_COSINE = {"campplus": 0.30, "resemblyzer": 0.65}
TURN_MERGE_COSINE = {"campplus": 0.45, "resemblyzer": 0.75}


def suggested_speaker_params(backend: str) -> dict[str, float]:
    """The node parameters measured for a speaker back-end (for `--set` lines, tests, other configs)."""
    out = {"voice_match_cosine": VOICE_MATCH_COSINE[backend]}
    if backend in TURN_CHANGE_COSINE:
        out |= {"turn_change_cosine": TURN_CHANGE_COSINE[backend], "turn_merge_cosine": TURN_MERGE_COSINE[backend]}
    return out


class Log(Protocol):
    """What back-end choices are reported to: a ROS logger or a `logging.Logger`."""

    def info(self, msg: str) -> Any: ...

    def warning(self, msg: str) -> Any: ...


_default_log: Log = logging.getLogger(__name__)


def _choice(p: Mapping[str, Any], name: str, choices: tuple[str, ...]) -> str:
    """The value of back-end parameter `name`, refused clearly when it is not one of choices."""
    if p[name] not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {p[name]!r}")
    return p[name]


def face_match_l2(backend: str, face_match_distance: float) -> float:
    """The L2 distance between unit embeddings the face pipeline clusters with.

    dlib: face_match_distance already is that L2 distance. insightface: it is a cosine distance
    d = 1 - cos, and |a - b| = sqrt(2 - 2 cos) = sqrt(2 d) on unit vectors.
    """
    if backend == "insightface":
        return cosine_to_l2(1.0 - face_match_distance)
    return face_match_distance


def build_face_encoder(p: Mapping[str, Any], log: Log = _default_log) -> Any:
    """The configured face encoder (detect / embed / encode, as FaceEncoder)."""
    backend = _choice(p, "face_backend", FACE_BACKENDS)
    if backend == "insightface":
        from m3_perception.faces.insightface_encoder import InsightFaceEncoder

        enc = InsightFaceEncoder(
            p["insightface_model_dir"], min_score=p["face_min_score"], min_face_px=p["face_min_size_px"]
        )
        cuda = "CUDAExecutionProvider" in enc.active_providers
        log.info(
            f"faces: InsightFace buffalo_l from {p['insightface_model_dir']} on onnxruntime "
            f"{'CUDA' if cuda else 'CPU (no CUDAExecutionProvider)'}; face_match_distance "
            f"{p['face_match_distance']} = cosine distance (L2 {face_match_l2(backend, p['face_match_distance']):.3f})"
        )
    else:
        enc = FaceEncoder(
            detector=p["face_detector"],
            min_score=p["face_min_score"],
            min_face_px=p["face_min_size_px"],
            recognition_model=p["face_recognition_model"],
            shape_predictor=p["face_shape_predictor"],
        )
    _warn_other_default("face_match_distance", p["face_match_distance"], backend, FACE_MATCH_DISTANCE, log)
    return enc


def speaker_encoder(backend: str, model: str = "", log: Log = _default_log) -> Any:
    """The speaker encoder of one back-end (`encode(samples) -> unit vector`); `model` empty = packaged.

    Shared by the perception node and the memory's audio queries, whose embeddings must come from
    the same model as the stored ones."""
    if backend not in SPEAKER_BACKENDS:
        raise ValueError(f"speaker_backend must be one of {SPEAKER_BACKENDS}, got {backend!r}")
    if backend == "campplus":
        from m3_perception.voices.campplus_encoder import CamPlusEncoder

        enc: Any = CamPlusEncoder(model)
        log.info(f"voices: CAM++ {enc.dim}-d from {enc.path} on {enc.runtime} CPU")
    elif backend == "eres2netv2":
        from m3_perception.voices.eres2net_encoder import Eres2NetEncoder

        enc = Eres2NetEncoder(model)
        runtime = "onnxruntime" if enc.format == "onnx" else "TorchScript"
        log.info(f"voices: ERes2NetV2 {enc.dim}-d from {enc.path} on {runtime} {enc.device.upper()}")
    else:
        from m3_perception.voices.resemblyzer_encoder import VoiceEncoder

        enc = VoiceEncoder(model)
    return enc


def build_voice_encoder(p: Mapping[str, Any], log: Log = _default_log) -> Any:
    """The configured speaker encoder (`encode(samples) -> unit vector`, as VoiceEncoder)."""
    backend = _choice(p, "speaker_backend", SPEAKER_BACKENDS)
    enc = speaker_encoder(backend, p["speaker_model"], log)
    _warn_other_default("voice_match_cosine", p["voice_match_cosine"], backend, VOICE_MATCH_COSINE, log)
    for name, table in (("turn_change_cosine", TURN_CHANGE_COSINE), ("turn_merge_cosine", TURN_MERGE_COSINE)):
        if name in p:
            _warn_other_default(name, p[name], backend, table, log)
    return enc


def _warn_other_default(name: str, value: float, backend: str, defaults: Mapping[str, float], log: Log) -> None:
    """Say so when a threshold is another back-end's suggested value (a back-end switched, threshold kept)."""
    if backend not in defaults:
        return  # nothing measured for this back-end: nothing to compare with
    for other, v in defaults.items():
        if other != backend and abs(value - v) < 1e-9 and abs(value - defaults[backend]) > 1e-9:
            log.warning(
                f"{name} {value} is the value suggested for {other}; with {backend} "
                f"{defaults[backend]} is suggested (see the m3_perception README, Thresholds)"
            )


def build_asr(p: Mapping[str, Any], log: Log = _default_log) -> Transcriber | None:
    """The configured speech-to-text back-end; an unreachable endpoint or a missing model fails here."""
    backend = _choice(p, "asr_backend", ASR_BACKENDS)
    if backend == "faster_whisper":
        return _build_faster_whisper(p, log)
    if backend == "pocketsphinx":
        if p["asr_subprocess"]:
            from m3_perception.speech.asr_process import SubprocessAsr

            return SubprocessAsr("pocketsphinx", model_dir=p["asr_model_dir"])
        from m3_perception.speech.pocketsphinx_asr import PocketsphinxAsr

        return PocketsphinxAsr(p["asr_model_dir"])
    if backend == "openai":
        from m3_perception.speech.openai_asr import OpenAiAsr

        return OpenAiAsr(
            p["asr_endpoint"], model=p["asr_model"], api_key_env=p["asr_api_key_env"], timeout_s=p["asr_timeout_s"]
        )
    if backend == "whisper":
        from m3_perception.speech.whisper_asr import WhisperAsr

        asr = WhisperAsr(p["asr_model_dir"], language=p["asr_language"], threads=p["asr_torch_threads"])
        lang = f"language {asr.language}" if asr.language else "language detected per utterance"
        if not asr.multilingual:
            lang = "English-only model"
        log.info(f"speech: Whisper from {asr.path} on torch {asr.device.upper()}, {lang}")
        return asr
    return None


def _build_faster_whisper(p: Mapping[str, Any], log: Log) -> Transcriber:
    options = {
        "model": p["asr_model"],
        "device": p["asr_device"],
        "compute_type": p["asr_compute_type"],
        "threads": p["asr_threads"],
        "language": p["asr_language"],
        "beam_size": p["asr_beam_size"],
        "word_timestamps": p["asr_word_timestamps"],
        "window_s": p["asr_window_s"],
    }
    if p["asr_subprocess"]:
        from m3_perception.speech.asr_process import SubprocessAsr

        asr: Any = SubprocessAsr("faster_whisper", **options)
        where = "in a child process"
    else:
        from m3_perception.speech.faster_whisper_asr import FasterWhisperAsr

        asr = FasterWhisperAsr(**options)
        where = "in this process"
    lang = f"language {p['asr_language']}" if p["asr_language"] else "language detected per utterance"
    log.info(f"speech: faster-whisper asr_model {p['asr_model']!r} {where}, {lang}")
    return asr


def build_pipelines(
    p: Mapping[str, Any], log: Log | None = None
) -> tuple[FacePipeline, VoicePipeline, FaceVoiceMatcher]:
    """`log` is told about each full-quality back-end chosen (the node passes its ROS logger)."""
    from m3_perception.speech.vad import SileroVad

    log = log or _default_log
    face_encoder = build_face_encoder(p, log)
    faces = FacePipeline(
        face_encoder,
        FaceParams(
            match_distance=face_match_l2(p["face_backend"], p["face_match_distance"]),
            reembed_every_n=p["face_reembed_every_n"],
            track_min_iou=p["face_track_min_iou"],
            track_max_age_s=p["face_track_max_age_s"],
            max_crops=p["face_max_crops"],
            send_crops=p["face_send_crops"],
        ),
    )
    faces.embedding_model = getattr(face_encoder, "embedding_model", faces.embedding_model)
    voice_encoder = build_voice_encoder(p, log)
    voices = VoicePipeline(
        SileroVad(p["vad_model"]),
        voice_encoder,
        build_asr(p, log),
        VoiceParams(
            match_cosine=p["voice_match_cosine"],
            match_cosine_narrowband=p["voice_match_cosine_narrowband"],
            segmenter=SegmenterParams(
                threshold=p["vad_threshold"],
                neg_threshold=max(0.01, p["vad_threshold"] - 0.15),
                min_utterance_s=p["min_utterance_s"],
                max_utterance_s=p["max_utterance_s"],
                hangover_s=p["hangover_s"],
            ),
            turns=TurnParams(
                enabled=p["turn_split"],
                window_s=p["turn_window_s"],
                hop_s=p["turn_hop_s"],
                change_cosine=p["turn_change_cosine"],
                change_cosine_narrowband=p["turn_change_cosine_narrowband"],
                merge_cosine=p["turn_merge_cosine"],
                merge_cosine_narrowband=p["turn_merge_cosine_narrowband"],
                min_turn_s=p["turn_min_s"],
            ),
            turn_mode=p["turn_mode"],
            segmentation_min_s=p["turn_segmentation_min_s"],
            revision=RevisionParams(
                enabled=p["voice_revision"],
                every_s=p["voice_revision_every_s"],
                window_s=p["voice_revision_window_s"],
                merge_cosine=p["voice_merge_cosine"],
                merge_cosine_narrowband=p["voice_merge_cosine_narrowband"],
                margin=p["voice_revision_margin"],
                min_pooled_s=p["turn_min_s"] * 2,
                faces=FaceSplitParams(
                    enabled=p["voice_face_split"],
                    min_turns=p["voice_face_split_min_turns"],
                    min_share=p["voice_face_split_share"],
                ),
            ),
            activity=ActivityParams(
                step_s=p["turn_segmentation_step_s"],
                onset=p["turn_segmentation_onset"],
                fill_gap_s=p["turn_segmentation_fill_gap_s"],
                min_run_s=p["turn_segmentation_min_run_s"],
                min_overlap_s=p["turn_segmentation_min_overlap_s"],
            ),
        ),
    )
    voices.embedding_model = getattr(voice_encoder, "embedding_model", voices.embedding_model)
    matcher = FaceVoiceMatcher(
        MatcherParams(min_evidence=p["match_min_evidence"], dominance_ratio=p["match_dominance_ratio"])
    )
    return faces, voices, matcher


OBJECT_BACKENDS = ("yolov3_tiny", "onnx", "none")
TEXT_BACKENDS = ("rapidocr", "none")


def build_seeing(p: Mapping[str, Any], log: Log | None = None) -> Any:
    """Objects and written text (seeing.Seeing) from the node's parameters, or None when both are 'none'.

    A bad value fails here naming its parameter; a missing model file with ModelFileMissing. Checked
    before anything loads, so a typo costs no model load."""
    from m3_perception.seeing import Seeing, SeeingParams

    log = log or _default_log
    objects = _choice(p, "object_backend", OBJECT_BACKENDS)
    text = _choice(p, "text_backend", TEXT_BACKENDS)
    classes = list(p["object_classes"] or [])
    if not all(isinstance(c, str) for c in classes):
        raise ValueError(f"object_classes must be a list of class names, got {classes!r}")
    settings = SeeingParams(
        rate_hz=p["object_rate_hz"],
        track_confidence=p["object_track_confidence"],
        text_interval_s=p["text_interval_s"],
        text_min_gap_s=p["text_min_gap_s"],
        text_change_threshold=p["text_change_threshold"],
    )  # checks the gate's values (ValueError naming the parameter)
    if objects == "none" and text == "none":
        log.info("objects and text: off (object_backend and text_backend 'none')")
        return None
    detector = reader = None
    if objects != "none":
        from m3_perception.objects.detectors import make_detector

        try:
            detector = make_detector(
                objects,
                confidence=p["object_confidence"],
                classes_kept=classes,
                min_box_px=p["object_min_box_px"],
                max_box_fraction=p["object_max_box_fraction"],
                nested=p["object_nested_overlap"],
                model_path=p["object_model_path"],
                names_path=p["object_names_path"],
            )
        except ValueError as e:
            raise ValueError(f"object_backend {objects!r}: {e}") from e
        log.info(f"objects: {objects} at most {p['object_rate_hz']} Hz, confidence {p['object_confidence']}")
    if text != "none":
        from m3_perception.text.ocr import make_reader

        reader = make_reader(text, min_confidence=p["text_min_confidence"], max_side_px=p["text_max_side_px"])
        log.info(f"text: {text} on keyframes every {p['text_interval_s']} s or on a view change")
    return Seeing(detector, reader, settings)
