"""Conversational variants of the real-speech conversation (real_speech.assemble_conversation):
zero-gap turns, overlap, backchannels, a telephone channel, a two-person dialogue; and the µ-law
codec. Each variant must be what it claims, on the real recordings the bench uses.

Data: Debian's pocketsphinx-testdata and the moonshine-voice wheel (installed by bootstrap.sh and
in CI). A missing file fails with the loader's message (ModelFileMissing); nothing is skipped.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from m3_perception.material.conversation_mix import BACKCHANNEL_S, place_backchannels, plan_overlaps
from m3_perception.material.real_speech import (
    RATE,
    Conversation,
    assemble_conversation,
    conversation_sources,
    dialogue_sources,
)
from m3_perception.material.telephone import mulaw_decode, mulaw_encode, telephone_channel
from m3_perception.speech.vad import SileroVad

BASE = {"short_share": 1.0, "back_to_back_share": 1.0}  # the bench's conversation


@pytest.fixture(scope="module")
def sources():
    return conversation_sources()


def _conv(sources, seed: int = 1, **kw) -> Conversation:
    return assemble_conversation(sources, SileroVad(), seed=seed, **BASE, **kw)


def _main_turns(conv: Conversation) -> list:
    return [t for t in conv.turns if not t.backchannel]


def test_variants_keep_the_default_turns(sources) -> None:
    """Same seed, same turns (speaker, source, length): a variant changes only where they go."""
    default = _conv(sources)
    shape = [(t.speaker, t.source, round((t.end - t.start) * RATE)) for t in default.turns]
    assert not any(t.backchannel for t in default.turns) and default.overlap_share() == 0.0
    for kw in ({"zero_gap": True}, {"overlap_share": 0.1}, {"backchannels": 5}, {"telephone": True}):
        conv = _conv(sources, **kw)
        assert [(t.speaker, t.source, round((t.end - t.start) * RATE)) for t in _main_turns(conv)] == shape, kw
    assert _conv(sources, telephone=True).reference() == default.reference()  # the channel moves no turn


def test_zero_gap_turns_touch(sources) -> None:
    default, conv = _conv(sources, seed=2), _conv(sources, seed=2, zero_gap=True)
    assert all(b.start == a.end for a, b in pairwise(conv.turns)), "every turn starts where the last ended"
    assert any(b.start > a.end for a, b in pairwise(default.turns))  # the default has its 0-0.3 s gaps
    assert conv.overlap_share() == 0.0 and len(conv.samples) < len(default.samples)


@pytest.mark.parametrize("share", [0.05, 0.1, 0.15])
def test_overlap_share_and_two_speakers_over_it(sources, share) -> None:
    conv = _conv(sources, seed=3, overlap_share=share)
    assert conv.overlap_share() == pytest.approx(share, abs=0.005)
    overlaps = [(a, b) for a, b in pairwise(conv.turns) if b.start < a.end]
    assert len(overlaps) >= 2
    for a, b in overlaps:
        assert a.speaker != b.speaker
        assert 0 < a.end - b.start <= 0.4 * min(a.end - a.start, b.end - b.start) + 1e-3  # OVERLAP_CAP
    for a, c in zip(conv.turns, conv.turns[2:], strict=False):
        assert c.start >= a.end, "never three voices at once"
    # the audio over the overlaps is both turns mixed: over all of them together louder than one turn's
    # level (RMS 0.05); one short overlap alone may fall on a pause of one of its speakers
    mixed = np.concatenate([conv.samples[round(b.start * RATE) : round(a.end * RATE)] for a, b in overlaps])
    assert float(np.sqrt(np.mean(mixed**2))) > 0.055


def test_backchannels_are_short_words_of_another_speaker(sources) -> None:
    conv = _conv(sources, seed=4, backchannels=6)
    words, turns = [t for t in conv.turns if t.backchannel], _main_turns(conv)
    assert len(words) == 6
    for w in words:
        assert BACKCHANNEL_S[0] - 1e-9 <= w.end - w.start <= BACKCHANNEL_S[1] + 1e-9
        hosts = [t for t in turns if t.start < w.end and w.start < t.end]
        if hosts:  # inside a turn: over its solo part, of someone else
            assert len(hosts) == 1 and hosts[0].speaker != w.speaker
            assert hosts[0].start + 0.3 - 1e-9 <= w.start and w.end <= hosts[0].end - 0.3 + 1e-9
        x = conv.samples[round(w.start * RATE) : round(w.end * RATE)]
        assert float(np.sqrt(np.mean(x**2))) > 0.04  # real speech there, not the noise floor (5e-4)
    assert len({w.speaker for w in words}) >= 2


def test_dialogue_alternates_two_speakers() -> None:
    conv = assemble_conversation(dialogue_sources(), SileroVad(), seed=1, **BASE)
    assert {t.speaker for t in conv.turns} == {"librivox", "two_cities"} and len(conv.turns) >= 10
    assert all(a.speaker != b.speaker for a, b in pairwise(conv.turns))


def test_telephone_band_and_rate(sources) -> None:
    conv = _conv(sources, seed=1, telephone=True)
    spectrum = np.abs(np.fft.rfft(conv.samples.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(conv.samples), 1 / RATE)
    total = spectrum.sum()
    assert spectrum[freqs > 4000].sum() / total < 1e-4, "nothing above the 8 kHz channel's Nyquist"
    assert spectrum[freqs < 200].sum() / total < 1e-2, "the 300 Hz high-pass"
    assert spectrum[(freqs > 300) & (freqs < 3400)].sum() / total > 0.95
    assert len(conv.samples) == len(_conv(sources, seed=1).samples)


def test_mulaw_matches_g711_and_round_trips() -> None:
    # G.711 values (as audioop.lin2ulaw / ulaw2lin gave them) for 16-bit samples
    x = np.array([0, 1000, -1000, 100, -5, 20000, 32767, -32767]) / 32767.0
    assert mulaw_encode(x).tolist() == [0xFF, 0xCE, 0x4E, 0xF2, 0x7E, 0x8C, 0x80, 0x00]
    assert (mulaw_decode(np.array([0xFF, 0x80, 0x00, 0xCE], np.uint8)) * 32768).tolist() == [0, 32124, -32124, 988]
    t = np.arange(8000) / 8000
    for amplitude in (0.01, 0.1, 0.8):  # µ-law keeps the error relative to the level: ~38 dB SNR at any level
        s = amplitude * np.sin(2 * np.pi * 440 * t)
        err = mulaw_decode(mulaw_encode(s)) - s
        assert 10 * np.log10(np.mean(s**2) / np.mean(err**2)) > 30
    speech = np.random.default_rng(0).normal(0, 0.05, 16000).astype(np.float32)
    assert telephone_channel(speech).dtype == np.float32 and len(telephone_channel(speech)) == 16000


def test_deterministic_for_a_seed() -> None:
    kw = {"zero_gap": True, "overlap_share": 0.05, "backchannels": 4, "telephone": True}
    a = assemble_conversation(dialogue_sources(), SileroVad(), seed=5, **BASE, **kw)
    b = assemble_conversation(dialogue_sources(), SileroVad(), seed=5, **BASE, **kw)
    c = assemble_conversation(dialogue_sources(), SileroVad(), seed=6, **BASE, **kw)
    assert np.array_equal(a.samples, b.samples) and a.turns == b.turns
    assert a.reference() != c.reference()


def test_backchannel_places_by_hand() -> None:
    """Turns of 0.8 s have no room inside (0.3 s margins); the 1.5 s gap between a and b takes the word,
    centred, and it is c's (not a neighbour's) while c has one that fits."""
    spans = [("a", 0, int(0.8 * RATE)), ("b", int(2.3 * RATE), int(3.1 * RATE))]
    words = {"a": [int(0.5 * RATE)], "b": [int(0.5 * RATE)], "c": [int(0.5 * RATE), int(2.0 * RATE)]}
    (bc,) = place_backchannels(spans, words, 1, np.random.default_rng(0))
    assert bc.speaker == "c" and bc.word == 0 and not bc.inside
    assert bc.start == (int(0.8 * RATE) + int(2.3 * RATE) - int(0.5 * RATE)) // 2
    # a long turn takes it inside, away from its edges, and never of its own speaker
    long = [("a", 0, 3 * RATE)]
    for seed in range(5):
        (bc,) = place_backchannels(long, {"a": [RATE // 2], "b": [RATE // 2]}, 1, np.random.default_rng(seed))
        assert bc.speaker == "b" and bc.inside and int(0.3 * RATE) <= bc.start <= int(2.2 * RATE)


def test_impossible_asks_raise() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"overlap_share 0\.5"):
        plan_overlaps([RATE, RATE, RATE], 0.5, rng)
    with pytest.raises(ValueError, match="only 0 of 1 backchannels"):
        place_backchannels([("a", 0, RATE), ("b", RATE, 2 * RATE)], {"a": [RATE], "b": [RATE]}, 1, rng)
