"""Objects and written text in a replay (issue 23), as the running nodes find and store them: perception's
Seeing on the frames the replay decodes for faces (at most object_rate_hz of stream time), run in line
(a replay drops nothing, where the node's seeing worker drops what it has no time for), turned into the
messages the node publishes and into the evidence the memory node makes of them. Off (nothing loaded)
when object_backend and text_backend are both 'none', the default.

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

    def evidence(self, rgb: np.ndarray, stamp_s: float) -> list:
        from m3_memory.evidence_msgs import seen_evidence
        from m3_perception.messages import object_tracks, text_regions

        if self.seeing is None or not self.seeing.frame_wanted(stamp_s):
            return []
        seen = self.seeing.process(rgb, stamp_s)
        items = seen_evidence(object_tracks(seen, "")) if seen.objects is not None else []
        return items + (seen_evidence(text_regions(seen, "")) if seen.texts is not None else [])
