"""Speaker turns and voice ids on REAL speech: conversations assembled from recordings of five
different real speakers (real_speech.conversation_sources), single readers, a short backchannel.

Data: Debian's pocketsphinx-testdata and the moonshine-voice wheel (installed by bootstrap.sh and
in CI). A missing file fails with the loader's message (ModelFileMissing); nothing is skipped.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from m3_perception.assembly import DEFAULT_SPEAKER_BACKEND, speaker_encoder
from m3_perception.material.metrics import der
from m3_perception.material.real_speech import (
    assemble_conversation,
    cards_clips,
    conversation_sources,
    librivox_clips,
    moonshine_asset,
    speech_units,
)
from m3_perception.speech.vad import SileroVad
from m3_perception.voices.pipeline import VoiceEvent, VoicePipeline, voiced_pieces
from m3_perception.voices.speaker_turns import TurnParams, split_turns

RATE = 16000


@pytest.fixture(scope="module")
def encoder():
    """The default speaker encoder (CAM++), as the node builds it."""
    return speaker_encoder(DEFAULT_SPEAKER_BACKEND)


@pytest.fixture(scope="module")
def sources():
    return conversation_sources()


def _run(encoder, samples: np.ndarray) -> tuple[VoicePipeline, list[VoiceEvent]]:
    """The voice pipeline with its defaults (VAD, turn splitting, clustering), no ASR, fed 0.1 s chunks."""
    pipe = VoicePipeline(SileroVad(), encoder, None)
    events: list[VoiceEvent] = []
    for i in range(0, len(samples), 1600):
        events += pipe.feed(samples[i : i + 1600], i / RATE)
    return pipe, events + pipe.flush()


class _SignEncoder:
    """Stand-in speaker encoder: the 'voice' is the sign of the samples (pure logic of split_turns)."""

    def encode(self, x: np.ndarray) -> np.ndarray:
        v = np.array([np.mean(x > 0), np.mean(x < 0)], np.float64)
        return v / max(float(np.linalg.norm(v)), 1e-12)


def test_split_turns_finds_the_change_and_ignores_a_short_piece() -> None:
    a, b = np.full(int(2.5 * RATE), 0.1, np.float32), np.full(int(2.5 * RATE), -0.1, np.float32)
    assert split_turns(np.concatenate([a, b]), _SignEncoder(), TurnParams()) == [(0, 40000), (40000, 80000)]
    blip = np.full(int(0.6 * RATE), -0.1, np.float32)  # shorter than min_turn_s: never its own turn
    pieces = split_turns(np.concatenate([a, blip, a]), _SignEncoder(), TurnParams())
    assert all(b - a >= TurnParams().min_turn_s * RATE for a, b in pieces)
    assert split_turns(np.concatenate([a, b]), _SignEncoder(), TurnParams(enabled=False)) == [(0, 80000)]


@pytest.fixture(scope="module")
def conversations(encoder, sources):
    """Two conversations of the five real speakers, back-to-back 1-3 s turns, through the pipeline."""
    out = []
    for seed in (1, 2):
        conv = assemble_conversation(sources, SileroVad(), seed=seed, short_share=1.0, back_to_back_share=1.0)
        out.append((conv, *_run(encoder, conv.samples)))
    return out


@pytest.mark.xfail(
    strict=True,
    reason="README, speaker model: seed 1's cards -> librivox change at 16.0 s is placed 0.49 s off (a 1.2 s "
    "card name back to back with the reader: the 1 s windows straddle both)",
)
def test_real_conversation_turn_changes_are_found(conversations) -> None:
    for conv, _, events in conversations:
        assert len({t.speaker for t in conv.turns}) >= 3
        assert all(b.start - a.end <= 0.3 for a, b in pairwise(conv.turns))
        boundaries = np.array([e.start for e in events] + [e.end for e in events])
        for a, b in pairwise(conv.turns):
            change = (a.end + b.start) / 2
            assert np.min(np.abs(boundaries - change)) <= 0.4, f"no turn boundary near {change:.2f} s ({a} -> {b})"


def test_real_conversation_der(conversations) -> None:
    """With CAM++ (DER 0.12 and 0.11 for seeds 1 and 2; resemblyzer gave 0.17-0.25). Fewer voices than
    speakers are allowed (a speaker whose turns are all short founds none)."""
    for conv, pipe, events in conversations:
        d = der(conv.reference(), [(e.start, e.end, e.voice_id) for e in events if e.voice_id])
        assert d.der <= 0.15, d
        assert len(pipe.clusters.identities) <= len({t.speaker for t in conv.turns})


@pytest.mark.parametrize(
    "reader",
    [
        "librivox",
        pytest.param(
            "two_cities",
            marks=pytest.mark.xfail(
                strict=True,
                reason="README, speaker model: one phantom 1.0 s turn (26-27 s) founds a second voice: CAM++'s "
                "1 s windows of one reader go down to cosine 0.08 (its utterances stay >= 0.54)",
            ),
        ),
        "beckett",
    ],
)
def test_one_reader_is_one_voice(encoder, reader) -> None:
    """A single speaker's long read (pauses kept) is never split into phantom voices. (beckett reads in
    0.7-0.9 s phrases between pauses: each is shorter than turn_min_s, so none founds a voice at all.)"""
    clips = librivox_clips() if reader == "librivox" else [moonshine_asset(reader)]
    gap = np.zeros(int(0.8 * RATE), np.float32)
    samples = np.concatenate([x for c in clips for x in (c.samples, gap)])
    pipe, events = _run(encoder, samples)
    assert len(events) >= 3 and len(pipe.clusters.identities) <= 1
    assert {e.voice_id for e in events} <= {*pipe.clusters.identities, ""}
    if reader != "beckett":
        assert set(pipe.clusters.identities) == {"voice_1"}
        labelled = sum(e.end - e.start for e in events if e.voice_id)
        assert labelled >= 0.8 * sum(e.end - e.start for e in events)


@pytest.mark.parametrize("pause_s", [0.15, 1.0])
def test_short_backchannel_founds_no_voice(encoder, pause_s) -> None:
    """A < 1 s real word of a new speaker (cards) between two turns, back to back or alone between pauses."""
    vad = SileroVad()
    card = cards_clips()[0]  # "ten of clubs"
    a, b = speech_units(card.samples, vad)[0]
    word = card.samples[a:b]
    assert len(word) < RATE
    first = librivox_clips()[0].samples
    second = moonshine_asset("two_cities").samples[int(1.2 * RATE) : int(4.6 * RATE)]
    pause = np.zeros(int(pause_s * RATE), np.float32)
    samples = np.concatenate([first, pause, word, pause, second, np.zeros(RATE, np.float32)])
    pipe, events = _run(encoder, samples)
    assert len(pipe.clusters.identities) == 2, [(e.start, e.end, e.voice_id) for e in events]
    t_word = (len(first) + len(pause) + len(word) / 2) / RATE
    assert not any(e.new_identity and e.start - 0.2 <= t_word <= e.end + 0.2 and e.end - e.start < 1.0 for e in events)


def test_a_piece_wholly_in_the_padding_gives_no_turn():
    """The segmentation model may hear a turn in the padding around the VAD's voiced part: that piece
    has no voiced speech, and its span used to end before it started (memory rejected the message)."""
    # Utterance samples from stream index 1000; voiced [1000 + 3200, 1000 + 40000); pieces cut at 2000 and 20000.
    pieces = [(0, 2000, False), (2000, 20000, False), (20000, 48000, True)]
    kept = voiced_pieces(pieces, 1000, 4200, 41000)
    assert kept == [(2000, 20000, False, 4200, 21000), (20000, 48000, True, 21000, 41000)]
    assert all(end > start for *_, start, end in kept)
    assert voiced_pieces([(0, 48000, False)], 1000, 4200, 41000) == [(0, 48000, False, 4200, 41000)]
