"""Objects and written text in a replay (issue 23), as the running nodes find and store them: perception's
Seeing on the frames the replay decodes for faces (at most object_rate_hz of stream time), run in line
(a replay drops nothing, where the node's seeing worker drops what it has no time for), and given to
memory as the evidence the memory node makes of m3/objects and m3/texts. Off (nothing loaded) when
object_backend and text_backend are both 'none', the default.

A resumed replay starts the object and text trackers afresh, so ids restart; memory keeps what was seen
as clip lines by class and reading, which do not carry the ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class ReplaySeeing:
    """`evidence(rgb, stamp_s)`: the ObjectEvidence and TextEvidence of one frame (none when off or not
    wanted at the rate)."""

    def __init__(self, perception_params: Mapping[str, Any]) -> None:
        from m3_perception.assembly import build_seeing

        self.seeing = build_seeing(perception_params)  # None when both are off; a bad value fails here
        self.objects = self.texts = 0  # evidence items given to memory

    def evidence(self, rgb: np.ndarray, stamp_s: float) -> list:
        from m3_memory.graph.records import ObjectEvidence, TextEvidence

        if self.seeing is None or not self.seeing.frame_wanted(stamp_s):
            return []
        seen = self.seeing.process(rgb, stamp_s)
        stamp_ns = round(stamp_s * 1e9)
        items: list = [
            ObjectEvidence(o.object_id, o.label.strip(), float(o.confidence), _box(o.box), stamp_ns)
            for o in seen.objects or []
            if o.object_id and o.label.strip()
        ]
        self.objects += len(items)
        texts = [
            TextEvidence(r.region_id, r.text.strip(), float(r.confidence), _box(r.box), stamp_ns)
            for r in seen.texts or []
            if r.region_id and r.text.strip()
        ]
        self.texts += len(texts)
        return items + texts


def _box(box) -> tuple[float, float, float, float]:
    x, y, w, h = box
    return float(x), float(y), float(w), float(h)
