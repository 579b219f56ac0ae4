"""Same- and different-speaker cosines of a speaker back-end on real speech: the figures the
thresholds were chosen from (README, Speaker model).

    python -m m3_perception.material.speaker_cosines campplus      # or resemblyzer

Material: real_speech.py's conversation speakers (LibriVox reader, two_cities, the pocketsphinx
raw recordings' reader, clone-test, cards) and moonshine's beckett. Utterances: stretches of speech
between pauses >= 0.3 s lasting >= 1 s. Pieces (2 s) and windows (`--window`, default 1 s,
non-overlapping) are cut from each recording with its pauses shortened to 0.25 s
(`real_speech.compact`). The pair two_cities-beckett is reported apart: CAM++ puts them as close
as one speaker's utterances.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence

import numpy as np

from m3_perception.material.real_speech import compact, conversation_sources, moonshine_asset, phrases, speech_units

RATE = 16000
SUSPECT = frozenset({"two_cities", "beckett"})
Item = tuple[str, str, int, np.ndarray]  # speaker, recording, index in the recording, unit embedding


def _q(values: Sequence[float]) -> str:
    if not values:
        return "-"
    p = np.percentile(values, [1, 5, 50, 95])
    spread = f"p1 {p[0]:.2f} p5 {p[1]:.2f} med {p[2]:.2f} p95 {p[3]:.2f}"
    return f"n={len(values)} min {min(values):.2f} {spread} max {max(values):.2f}"


def material(encoder, window_s: float) -> dict[str, list[Item]]:
    """Embedded utterances, 2 s pieces and windows of every speaker."""
    from m3_perception.speech.vad import SileroVad

    vad = SileroVad()
    sources = conversation_sources()
    sources["beckett"] = [moonshine_asset("beckett")]
    out: dict[str, list[Item]] = {"utterances": [], "2 s pieces": [], f"{window_s:g} s windows": []}
    for speaker, recordings in sources.items():
        for rec in recordings:
            units = speech_units(rec.samples, vad)
            for k, ph in enumerate(phrases(units, 0.3)):
                a, b = ph[0][0], ph[-1][1]
                if b - a >= RATE:
                    out["utterances"].append((speaker, rec.name, k, encoder.encode(rec.samples[a:b])))
            x, _ = compact(rec.samples, units, 0.25)
            for k, s in enumerate(range(0, len(x) - 2 * RATE + 1, 2 * RATE)):
                out["2 s pieces"].append((speaker, rec.name, k, encoder.encode(x[s : s + 2 * RATE])))
            if len(x) >= window_s * RATE:
                for k, w in enumerate(encoder.encode_windows(x, window_s, window_s)):
                    out[f"{window_s:g} s windows"].append((speaker, rec.name, k, w))
    return out


def report(name: str, items: list[Item]) -> list[str]:
    """Lines: same speaker, adjacent same, different (without and with the suspect pair), centroids."""
    same, adjacent, different, suspect = [], [], [], []
    for (s1, r1, k1, v1), (s2, r2, k2, v2) in itertools.combinations(items, 2):
        c = float(v1 @ v2)
        if s1 == s2:
            same.append(c)
            if r1 == r2 and abs(k1 - k2) == 1:
                adjacent.append(c)
        else:
            (suspect if {s1, s2} == SUSPECT else different).append(c)
    own, other = [], []
    for i, (s, _, _, v) in enumerate(items):
        for speaker in {it[0] for it in items}:
            vs = [it[3] for j, it in enumerate(items) if it[0] == speaker and j != i]
            if not vs or (speaker != s and {speaker, s} == SUSPECT):
                continue
            centroid = np.mean(vs, axis=0)
            (own if speaker == s else other).append(float(v @ centroid) / max(float(np.linalg.norm(centroid)), 1e-12))
    return [
        f"{name}: same speaker {_q(same)}",
        f"{name}: adjacent, same speaker {_q(adjacent)}",
        f"{name}: different speakers {_q(different)}",
        f"{name}: two_cities-beckett {_q(suspect)}",
        f"{name}: vs own centroid (leave one out) {_q(own)}; vs another speaker's {_q(other)}",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="m3_perception.material.speaker_cosines", description=__doc__.split("\n")[0])
    ap.add_argument("backend", choices=["campplus", "resemblyzer"])
    ap.add_argument("--window", type=float, default=1.0, help="window length [s]")
    args = ap.parse_args(argv)
    from m3_perception.assembly import speaker_encoder

    for name, items in material(speaker_encoder(args.backend), args.window).items():
        print("\n".join(report(name, items)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
