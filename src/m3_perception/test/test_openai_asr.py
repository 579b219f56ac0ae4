"""OpenAI-compatible transcription client against a local server that really transcribes."""

import numpy as np
import pytest
from transcription_server import TranscriptionServer

from m3_perception.material.metrics import wer
from m3_perception.material.synthetic import speak
from m3_perception.speech.openai_asr import AsrBackendError, OpenAiAsr

LINE = "the red folder is on the kitchen table"


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return speak(LINE, "slt")


def test_transcribes_through_the_endpoint_with_key(speech, monkeypatch) -> None:
    monkeypatch.setenv("M3_TEST_ASR_KEY", "sekret")
    with TranscriptionServer(api_key="sekret") as srv:
        asr = OpenAiAsr(srv.url, model="whisper-large-v3", api_key_env="M3_TEST_ASR_KEY")
        t = asr.transcribe(speech)
        assert wer(LINE, t.text) <= 0.35, t.text
        assert 0.3 < t.confidence <= 1.0 and t.language == "en"
        req = srv.requests[-1]
        assert req["model"] == "whisper-large-v3" and req["response_format"] == "verbose_json"
        assert req["language"] == "en" and req["file"][:4] == b"RIFF"


def test_wrong_key_and_server_errors_are_clear(speech, monkeypatch) -> None:
    monkeypatch.setenv("M3_TEST_ASR_KEY", "wrong")
    with TranscriptionServer(api_key="sekret") as srv:
        with pytest.raises(AsrBackendError, match="refused the API key"):
            OpenAiAsr(srv.url, api_key_env="M3_TEST_ASR_KEY")
    with TranscriptionServer(fail_with=503) as srv:
        asr = OpenAiAsr(srv.url, api_key_env="")
        with pytest.raises(AsrBackendError, match=r"HTTP 503.*overloaded"):
            asr.transcribe(speech)


def test_unreachable_endpoint_fails_at_start() -> None:
    with TranscriptionServer() as srv:
        url = srv.url
    with pytest.raises(AsrBackendError, match=r"unreachable") as e:
        OpenAiAsr(url, api_key_env="", timeout_s=2.0)
    assert url in str(e.value)


def test_failed_transcription_keeps_the_utterance(speech) -> None:
    from m3_perception.speech.vad import SileroVad
    from m3_perception.voices.pipeline import VoicePipeline
    from m3_perception.voices.resemblyzer_encoder import VoiceEncoder

    with TranscriptionServer(fail_with=500) as srv:
        pipe = VoicePipeline(SileroVad(), VoiceEncoder(), OpenAiAsr(srv.url, api_key_env=""))
        errors: list[Exception] = []
        pipe.on_asr_error = errors.append
        gap = np.zeros(8000, np.float32)
        events = pipe.feed(np.concatenate([gap, speech, gap, gap]), 10.0) + pipe.flush()
    assert len(events) == 1 and events[0].voice_id == "voice_1" and events[0].transcript.text == ""
    assert len(errors) == 1 and "HTTP 500" in str(errors[0])


def test_node_with_openai_backend_fails_start_on_dead_endpoint() -> None:
    import rclpy
    from rclpy.parameter import Parameter

    from m3_perception.perception_node import PerceptionNode
    from m3_runtime.managed_node import bring_up

    with TranscriptionServer() as srv:
        url = srv.url
    rclpy.init()
    try:
        node = PerceptionNode(
            parameter_overrides=[
                Parameter("asr_backend", value="openai"),
                Parameter("asr_endpoint", value=url),
                Parameter("asr_timeout_s", value=2.0),
            ]
        )
        with pytest.raises(AsrBackendError, match="unreachable"):
            bring_up(node)
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
