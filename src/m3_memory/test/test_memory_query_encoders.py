"""Audio queries with real speech: Festival voices, embedded by the memory's own speaker encoder (the
perception's default, CAM++), as the stored voices were; a memory of another model's voices."""

from __future__ import annotations

import numpy as np
import pytest
from m3mem_evidence import clip

from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.records import VoiceEvidence
from m3_memory.search.query_encoders import QueryEncoders

S = 1_000_000_000


@pytest.fixture(scope="module")
def speech():
    from m3_perception.material.synthetic import speak

    encoder = QueryEncoders()._voice_encoder()  # built as the memory node builds it
    said = {
        "slt": speak("I like green tea and I keep my keys in the kitchen drawer.", "slt"),
        "kal": speak("I work at the bakery on the corner of main street.", "kal"),
        "slt_query": speak("Good morning, could you please open the window for me?", "slt"),
    }
    return encoder, said, {name: encoder.encode(audio) for name, audio in said.items()}


def test_voice_sample_finds_the_stored_voice(memory, speech):
    from m3_runtime.audio_codec import encode_s16le

    encoder, said, embedded = speech
    memory.ingest(
        clip(0, voices=[
            VoiceEvidence("voice_1", 1 * S, 4 * S, "I like green tea", 0.9, list(embedded["slt"]), 1),
            VoiceEvidence("voice_2", 5 * S, 8 * S, "I work at the bakery", 0.9, list(embedded["kal"]), 2),
        ])
    )  # fmt: skip
    encoders = QueryEncoders(voice_encoder=encoder)
    query = encoders.voice_embedding_from_audio(16000, 1, "S16LE", encode_s16le(said["slt_query"]))
    hits = memory.search.search_node(voice_embedding=query, top_k=2)
    assert [h.node_id for h in hits] == ["voice_1", "voice_2"]
    assert hits[0].score > hits[1].score
    assert float(np.dot(query, embedded["slt"])) == pytest.approx(hits[0].score, abs=1e-4)


def test_the_query_encoder_is_the_perception_default(speech):
    from m3_perception.assembly import DEFAULT_SPEAKER_BACKEND

    encoder, _, embedded = speech
    assert encoder.embedding_model == DEFAULT_SPEAKER_BACKEND == "campplus"
    assert embedded["slt"].shape == (192,)


def test_a_query_against_voices_of_another_model_is_refused(memory, speech):
    """A memory whose voices came from resemblyzer (256-d), queried with CAM++ (192-d): a clear
    INVALID_AUDIO naming both sizes, never a crash nor a meaningless match."""
    from m3_perception.voices.resemblyzer_encoder import VoiceEncoder
    from m3_runtime.audio_codec import encode_s16le

    encoder, said, _ = speech
    old = VoiceEncoder().encode(said["slt"])
    memory.ingest(clip(0, voices=[VoiceEvidence("voice_1", 1 * S, 4 * S, "I like green tea", 0.9, list(old), 1)]))
    query = QueryEncoders(voice_encoder=encoder).voice_embedding_from_audio(
        16000, 1, "S16LE", encode_s16le(said["slt_query"])
    )
    with pytest.raises(MemoryApiError, match="voice embedding has 192 values; the stored voices have 256") as info:
        memory.search.search_node(voice_embedding=query, top_k=2)
    assert info.value.code == errors.INVALID_AUDIO


def test_unusable_audio_is_invalid_audio(speech):
    encoder, _, _ = speech
    encoders = QueryEncoders(voice_encoder=encoder)
    for args in (
        (16000, 1, "S24LE", b"\x00" * 3200),
        (16000, 1, "S16LE", b"\x00" * 3),
        (16000, 1, "S16LE", b"\x00" * 800),
    ):
        with pytest.raises(MemoryApiError) as info:
            encoders.voice_embedding_from_audio(*args)
        assert info.value.code == errors.INVALID_AUDIO


class NeverCalled:
    """An encoder for queries that must be refused before anything is decoded or embedded."""

    def encode(self, _):
        raise AssertionError("the query reached the encoder")


def test_a_huge_image_query_is_invalid_before_it_is_decoded():
    """Issue 13: a valid 27000x27000 mono8 query decoded to 2.2 GB of RGB and crashed the memory node."""
    encoders = QueryEncoders(face_encoder=NeverCalled())
    data = memoryview(np.zeros(27000 * 27000, np.uint8))  # calloc'd: its pages are never touched
    with pytest.raises(MemoryApiError, match="27000x27000 = 729000000 pixels is over the limit of 40000000") as info:
        encoders.face_embedding_from_image("mono8", 27000, 27000, 27000, data)
    assert info.value.code == errors.INVALID_IMAGE
    small = QueryEncoders(face_encoder=NeverCalled(), max_image_pixels=100)
    with pytest.raises(MemoryApiError, match="11x10 = 110 pixels is over the limit of 100"):
        small.face_embedding_from_image("mono8", 11, 10, 11, bytes(110))


def test_audio_queries_outside_the_limits_are_invalid_audio():
    """Issue 13: sample_rate 999 999 937 made the resampler raise MemoryError (INTERNAL_ERROR)."""
    encoders = QueryEncoders(voice_encoder=NeverCalled())
    for rate in (999_999_937, 1):
        with pytest.raises(MemoryApiError, match=f"sample_rate {rate} Hz is outside") as info:
            encoders.voice_embedding_from_audio(rate, 1, "S16LE", bytes(65536))
        assert info.value.code == errors.INVALID_AUDIO
    short = QueryEncoders(voice_encoder=NeverCalled(), max_audio_s=2.0)
    with pytest.raises(MemoryApiError, match=r"3\.0 s is longer than the limit of 2\.0 s"):
        short.voice_embedding_from_audio(16000, 1, "S16LE", bytes(96000))
