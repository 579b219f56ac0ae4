"""pocketsphinx in a child process: same text as in-process, start-up errors keep their type, a killed
child is reported and replaced."""

import os
import signal

import pytest

from m3_perception.material.synthetic import speak
from m3_perception.model_files import ModelFileMissing
from m3_perception.speech.asr_process import AsrProcessError, SubprocessAsr
from m3_perception.speech.pocketsphinx_asr import PocketsphinxAsr


@pytest.fixture(scope="module")
def utterance():
    return speak("alice put the keys in the drawer this morning", "slt")


@pytest.fixture(scope="module")
def asr():
    sub = SubprocessAsr("pocketsphinx")
    yield sub
    sub.close()


def test_child_process_transcribes_like_the_in_process_decoder(asr, utterance) -> None:
    here = PocketsphinxAsr().transcribe(utterance)
    there = asr.transcribe(utterance)
    assert there.text and there == here  # same decoder settings, same samples: same words and confidence
    assert asr._pool.submit(os.getpid).result() != os.getpid()  # decoded in another process


def test_missing_model_is_raised_by_the_constructor(tmp_path) -> None:
    with pytest.raises(ModelFileMissing, match="pocketsphinx acoustic"):
        SubprocessAsr("pocketsphinx", model_dir=str(tmp_path))


def test_killed_child_is_reported_then_replaced(utterance) -> None:
    sub = SubprocessAsr("pocketsphinx")
    try:
        os.kill(sub._pool.submit(os.getpid).result(), signal.SIGKILL)
        with pytest.raises(AsrProcessError, match="died"):
            sub.transcribe(utterance)
        assert sub.transcribe(utterance).text  # a new child took over
    finally:
        sub.close()
