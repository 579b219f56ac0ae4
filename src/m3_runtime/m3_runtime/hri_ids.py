"""REP-155 (ROS4HRI) identity conventions shared by the perception and memory nodes. Plain module.

Our ids (face_3, voice_1, person_2) are used as REP-155 ids unchanged: REP-155 allows any unique id,
and they are valid ROS name tokens, so /humans/persons/person_2/name is a valid topic.
"""

from __future__ import annotations

import re

# A ROS 2 name token: a letter or underscore first, then letters, digits, underscores; never "__".
_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def valid_id(entity_id: str) -> bool:
    """Whether an id can name a /humans/<kind>/<id>/ namespace."""
    return bool(_TOKEN.match(entity_id)) and "__" not in entity_id


class RecentVoices:
    """Voices heard within the last `window_s` of stream time: REP-155's "tracked" voices (a voice
    has no presence between utterances, so it stays tracked for a while after it spoke)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._last: dict[str, float] = {}  # voice id -> end of its last utterance [s]
        self._now = float("-inf")

    def heard(self, voice_id: str, end: float) -> None:
        self._last[voice_id] = max(end, self._last.get(voice_id, end))
        self._now = max(self._now, end)

    def advance(self, now: float) -> bool:
        """Move stream time on; True when a voice dropped out of the window."""
        self._now = max(self._now, now)
        before = len(self._last)
        self._last = {v: t for v, t in self._last.items() if t >= self._now - self.window_s}
        return len(self._last) != before

    def ids(self) -> list[str]:
        return sorted(self._last, key=lambda v: (len(v), v))
