"""Snapshots of a replay's perception state at clip boundaries, so a resume knows the same people.

`m3 replay` resumes at the first clip the memory has not stored. Perception is stateful (face and
voice identities, tracker, matcher, an utterance in progress), and restarting it cold in the middle
of a scene gave new ids to known people (issue 13: 6 persons instead of 3, two "Carol"s). So before
the first message of each clip window the replay saves its whole state (perception's identity state,
the clip windows' position, the stamp guards, where it is in the recording) to
`MEMORY_DIR/replay_snapshots/clip_NNNNNN.npz` (state_file: JSON + arrays, atomic, no pickle).
Clips are stored asynchronously, after perception has moved on, so several snapshots exist at once;
those older than the newest one at or before the memory's next clip are pruned.

On resume the newest snapshot at or before the first missing clip is loaded; a snapshot that cannot
be read, was made from another recording or with other parameters, or of another format is skipped
with a warning and the next older one is tried. With none left the replay starts again at the
recording's beginning with cold perception (the only state known to be right), re-reading what was
already stored without storing it again: slower, never wrong.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from m3_runtime.state_file import StateError, read_state, write_state

SNAPSHOT_DIR = "replay_snapshots"
SNAPSHOT_VERSION = 1
_NAME = re.compile(r"^clip_(\d{6,})\.npz$")
log = logging.getLogger("m3_agent.replay")


def fingerprint(bag: Path, start_ns: int, first_clip_index: int, params: Mapping[str, Any]) -> dict:
    """What a snapshot must have been made from to be used: the same recording, replayed into this
    memory from the same first clip, with the same parameters (perception's and the clip windows')."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()
    return {"bag": str(bag), "bag_start_ns": start_ns, "first_clip_index": first_clip_index, "params": digest}


class Snapshots:
    """The snapshot files of one memory directory for one replayed recording."""

    def __init__(self, memory_dir: Path, fp: dict) -> None:
        self.dir = Path(memory_dir) / SNAPSHOT_DIR
        self.fp = fp

    def labels(self) -> list[int]:
        """Clip indices that have a snapshot file, ascending."""
        if not self.dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := _NAME.match(p.name)))

    def path(self, label: int) -> Path:
        return self.dir / f"clip_{label:06d}.npz"

    def save(self, label: int, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        """The state before clip `label`'s window (atomic: a kill leaves the old file or the new)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = {**meta, "snapshot_version": SNAPSHOT_VERSION, "label": label, "fingerprint": self.fp}
        write_state(self.path(label), meta, arrays)

    def prune(self, next_index: int) -> None:
        """Remove the snapshots a resume can no longer want: those before the newest one at or
        before `next_index` (the memory's first missing clip)."""
        labels = self.labels()
        usable = [label for label in labels if label <= next_index]
        for label in labels:
            if usable and label < usable[-1]:
                self.path(label).unlink(missing_ok=True)

    def clear(self) -> None:
        for label in self.labels():
            self.path(label).unlink(missing_ok=True)

    def candidates(self, next_index: int) -> Iterator[tuple[int, dict, dict[str, np.ndarray]]]:
        """(label, metadata, arrays) of the snapshots at or before `next_index` that read and match
        this replay, newest first; a warning for each that does not."""
        for label in reversed([label for label in self.labels() if label <= next_index]):
            path = self.path(label)
            try:
                meta, arrays = read_state(path)
                self._check(meta, label)
            except StateError as error:
                log.warning("perception snapshot %s is not usable, trying an older one: %s", path, error)
                continue
            yield label, meta, arrays

    def _check(self, meta: dict, label: int) -> None:
        if meta.get("snapshot_version") != SNAPSHOT_VERSION:
            raise StateError(
                f"snapshot version {meta.get('snapshot_version')!r}, this version reads {SNAPSHOT_VERSION}"
            )
        if meta.get("label") != label:
            raise StateError(f"made for clip {meta.get('label')!r}, not {label}")
        fp = meta.get("fingerprint")
        if fp != self.fp:
            differs = sorted(k for k in self.fp if not isinstance(fp, dict) or fp.get(k) != self.fp[k])
            raise StateError(f"made from another replay (differs in {', '.join(differs)})")
        if not isinstance(meta.get("replay"), dict) or not isinstance(meta.get("perception"), dict):
            raise StateError("no replay or perception state in it")


def capture(pipelines: tuple, windows, stamps: dict, last_frame_s: float | None, position: dict) -> tuple[dict, dict]:
    """(metadata, arrays) of a replay's whole state at a message boundary. `position`: where the
    next message is ({"offset_ns", "skip", "at_end"}, see Replayer.run)."""
    from m3_perception import identity_state

    perception, arrays = identity_state.capture(*pipelines)
    replay = {
        "windows": windows.checkpoint(),
        "stamps": {topic: guard.state() for topic, guard in stamps.items()},
        "last_frame_s": last_frame_s,
        "position": position,
    }
    return {"perception": perception, "replay": replay}, arrays


def restore(meta: dict, arrays: dict, pipelines: tuple, windows, stamps: dict) -> tuple[float | None, dict]:
    """Put a snapshot back into fresh pipelines, clip windows and stamp guards; returns (last frame's
    stamp, position). StateError when it is malformed (the pipelines are then untouched)."""
    from m3_perception import identity_state

    replay = meta["replay"]
    try:
        windows.restore(replay["windows"])
        if set(replay["stamps"]) != set(stamps):
            raise StateError(f"stamp guards for {sorted(replay['stamps'])}, this replay reads {sorted(stamps)}")
        for topic, guard in stamps.items():
            guard.restore(replay["stamps"][topic])
        last = replay["last_frame_s"]
        p = replay["position"]
        position = {"offset_ns": int(p["offset_ns"]), "skip": int(p["skip"]), "at_end": bool(p["at_end"])}
        last_frame_s = None if last is None else float(last)
    except (KeyError, TypeError, ValueError) as error:
        raise StateError(f"malformed replay state ({type(error).__name__}: {error})") from error
    identity_state.restore(*pipelines, meta["perception"], arrays)
    return last_frame_s, position
