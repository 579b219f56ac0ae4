"""Build the face and voice pipelines from parameter values (the node's and `m3 replay`'s).

Models load here, so a missing file fails with its name (ModelFileMissing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from m3_perception.asr import Transcriber
from m3_perception.face_encoder import FaceEncoder
from m3_perception.face_pipeline import FaceParams, FacePipeline
from m3_perception.face_voice_matcher import FaceVoiceMatcher, MatcherParams
from m3_perception.utterances import SegmenterParams
from m3_perception.voice_pipeline import VoiceParams, VoicePipeline

ASR_BACKENDS = ("pocketsphinx", "openai", "none")


def build_asr(p: Mapping[str, Any]) -> Transcriber | None:
    """The configured speech-to-text back-end; an unreachable endpoint fails here."""
    backend = p["asr_backend"]
    if backend not in ASR_BACKENDS:
        raise ValueError(f"asr_backend must be one of {ASR_BACKENDS}, got {backend!r}")
    if backend == "pocketsphinx":
        from m3_perception.asr import PocketsphinxAsr

        return PocketsphinxAsr(p["asr_model_dir"])
    if backend == "openai":
        from m3_perception.openai_asr import OpenAiAsr

        return OpenAiAsr(
            p["asr_endpoint"], model=p["asr_model"], api_key_env=p["asr_api_key_env"], timeout_s=p["asr_timeout_s"]
        )
    return None


def build_pipelines(p: Mapping[str, Any]) -> tuple[FacePipeline, VoicePipeline, FaceVoiceMatcher]:
    from m3_perception.vad import SileroVad
    from m3_perception.voice_encoder import VoiceEncoder

    face_encoder = FaceEncoder(
        detector=p["face_detector"],
        min_score=p["face_min_score"],
        min_face_px=p["face_min_size_px"],
        recognition_model=p["face_recognition_model"],
        shape_predictor=p["face_shape_predictor"],
    )
    faces = FacePipeline(
        face_encoder,
        FaceParams(
            match_distance=p["face_match_distance"],
            reembed_every_n=p["face_reembed_every_n"],
            track_min_iou=p["face_track_min_iou"],
            track_max_age_s=p["face_track_max_age_s"],
            max_crops=p["face_max_crops"],
            send_crops=p["face_send_crops"],
        ),
    )
    voices = VoicePipeline(
        SileroVad(p["vad_model"]),
        VoiceEncoder(p["speaker_model"]),
        build_asr(p),
        VoiceParams(
            match_cosine=p["voice_match_cosine"],
            segmenter=SegmenterParams(
                threshold=p["vad_threshold"],
                neg_threshold=max(0.01, p["vad_threshold"] - 0.15),
                min_utterance_s=p["min_utterance_s"],
                max_utterance_s=p["max_utterance_s"],
                hangover_s=p["hangover_s"],
            ),
        ),
    )
    matcher = FaceVoiceMatcher(
        MatcherParams(min_evidence=p["match_min_evidence"], dominance_ratio=p["match_dominance_ratio"])
    )
    return faces, voices, matcher
