"""Clip windows on the stream's own clock: evidence is grouped into windows of clip_seconds.

A window closes when evidence stamped at or after its end (plus close_delay, for utterances that are
published after they end) arrives, and on flush (shutdown). Late evidence, stamped before the open
window, joins the open window rather than being lost. Windows without evidence are skipped. Each window keeps up to
`keyframes` frames, the first frame of each equal slice of the window (a vision memorizer sees the
scene through them; the first is stored with the clip).

Every stamp passes a StampGuard first: evidence stamped more than `max_jump_s` away from the
stream's time, outside Time's range, or ending before it starts raises StampRejected and is not
kept, so one bad message cannot open a clip far in the future. When the stream really moves to a
new time (StampGuard's re-anchoring), the open window is closed and windows restart there, their
indices continuing.

Revisions of voices (VoiceRevision, perception's IdentityUpdate) change the evidence not yet stored:
a corrected utterance of the open window takes its new voice; a merge renames the merged id in the
open window and is recorded on it (ClipEvidence.voice_merges; on the next window opened when none is
open), so that the memory, storing that clip, also merges what stored clips made of the two ids.
A correction of an utterance stored already comes too late: `revise` counts it, the caller reports it.

ClipCloser closes the open window without new evidence, in a running memory node (issue 21, D8):
on the stream clock, and when the stream has stopped for `clip_idle_close_s` (see its docstring).
"""

from __future__ import annotations

from m3_memory.graph.records import (
    ClipEvidence,
    FaceEvidence,
    MatchEvidence,
    ObjectEvidence,
    TextEvidence,
    VoiceEvidence,
    VoiceRevision,
)
from m3_runtime.stamps import StampGuard

NS = 1_000_000_000


class ClipWindows:
    """Accumulates evidence; returns the ClipEvidence of every window that closes."""

    def __init__(
        self,
        clip_seconds: float = 30.0,
        first_index: int = 0,
        close_delay_s: float = 0.0,
        origin_ns: int | None = None,
        keyframes: int = 1,
        max_jump_s: float = 3600.0,
    ) -> None:
        """origin_ns: stream time of window 0's start (a recording's start); None = first evidence.
        keyframes: frames kept per window (at least 1, the stored keyframe).
        max_jump_s: evidence further than this from the stream's time is refused (StampRejected)."""
        if clip_seconds <= 0:
            raise ValueError("clip_seconds must be > 0")
        self.keyframes = max(1, int(keyframes))
        self.clip_ns = int(clip_seconds * NS)
        self.close_delay_ns = int(close_delay_s * NS)
        self.first_index = first_index
        self._origin: int | None = origin_ns
        self._open: ClipEvidence | None = None
        self._window = 0
        self.last_stamp_ns = 0  # newest evidence stamp (lets the node tell live streams from replays)
        self.stamps = StampGuard(max_jump_s)
        self._stub = False  # the open window was restored without its evidence (see restore)
        self._stub_held = False  # ... and it held evidence then (its clip is stored, merges with it)
        self._pending_merges: list[tuple[str, str]] = []  # voice merges for the next window opened

    def _window_of(self, stamp_ns: int) -> int:
        return max(0, (stamp_ns - self._origin) // self.clip_ns)

    def add(
        self, item: FaceEvidence | VoiceEvidence | MatchEvidence | ObjectEvidence | TextEvidence
    ) -> list[ClipEvidence]:
        """Add evidence; returns the clips it closed (usually none, at most one). Raises StampRejected."""
        stamp = item.start_ns if isinstance(item, VoiceEvidence) else item.stamp_ns
        closed = self._admit(stamp, item.stamp_ns)
        closed += self._advance(stamp)
        clip = self._ensure_open()
        if isinstance(item, FaceEvidence):
            clip.faces.append(item)
        elif isinstance(item, VoiceEvidence):
            clip.voices.append(item)
        elif isinstance(item, ObjectEvidence):
            clip.objects.append(item)
        elif isinstance(item, TextEvidence):
            clip.texts.append(item)
        else:
            clip.matches.append(item)
        return closed

    def _slot(self, clip: ClipEvidence, stamp_ns: int) -> int:
        offset = min(max(0, stamp_ns - clip.start_ns), self.clip_ns - 1)
        return offset * self.keyframes // self.clip_ns

    def _slot_free(self, clip: ClipEvidence, stamp_ns: int) -> bool:
        slot = self._slot(clip, stamp_ns)
        return all(self._slot(clip, kept) != slot for kept, _ in clip.keyframes)

    def wants_keyframe(self, stamp_ns: int) -> bool:
        """Whether a frame at this stamp would become a keyframe (so callers decode only those)."""
        if self._open is None or stamp_ns >= self._open.end_ns + self.close_delay_ns:
            return True
        return self._slot_free(self._open, stamp_ns)

    def add_keyframe(self, stamp_ns: int, jpeg: bytes) -> list[ClipEvidence]:
        """Keep the first frame of each slice of the window; the first one kept is the clip's keyframe.
        Raises StampRejected."""
        closed = self._admit(stamp_ns, stamp_ns)
        closed += self._advance(stamp_ns)
        clip = self._ensure_open()
        if self._slot_free(clip, stamp_ns):
            clip.keyframes.append((stamp_ns, jpeg))
            clip.keyframes.sort(key=lambda frame: frame[0])
        if not clip.keyframe_jpeg:
            clip.keyframe_jpeg = jpeg
        return closed

    def heard(self) -> ClipEvidence | None:
        """A copy of the open window's clip (its lists copied), or None: what search/heard.py serves
        from another thread. Copying a list is atomic in CPython, so no lock is taken: a search never
        waits behind evidence blocked on a full memorizer backlog."""
        clip = self._open
        if clip is None:
            return None
        return ClipEvidence(clip.clip_index, clip.start_ns, clip.end_ns, voices=list(clip.voices))

    def revise(self, revision: VoiceRevision) -> int:
        """Apply a revision of voices to the evidence not yet stored (see the module docstring).
        Returns the corrections that came too late: their utterance is not in the open window."""
        clip = self._open
        voices = {} if clip is None else {v.segment_id: v for v in clip.voices}
        late = 0
        for segment_id, _previous, now in revision.corrections:
            if segment_id in voices:
                voices[segment_id].voice_id = now
            else:
                late += 1
        merges = [(gone, into) for gone, into in revision.merges if gone != into]
        if clip is None:
            self._pending_merges += merges
            return late
        for gone, into in merges:
            for voice in clip.voices:
                voice.voice_id = into if voice.voice_id == gone else voice.voice_id
            for match in clip.matches:
                match.id1 = into if match.id1 == gone else match.id1
                match.id2 = into if match.id2 == gone else match.id2
        clip.voice_merges += merges
        return late

    def tick(self, now_ns: int) -> list[ClipEvidence]:
        """Close the open window when the stream clock has passed its end (no evidence needed)."""
        if self._origin is None or self._open is None:
            return []
        if now_ns >= self._open.end_ns + self.close_delay_ns:
            return self.flush()
        return []

    def flush(self) -> list[ClipEvidence]:
        """Close the open window now (shutdown); returns it when it holds evidence."""
        clip, self._open = self._open, None
        stub, self._stub = self._stub, False
        if clip is None:
            return []
        if clip.is_empty() and not (stub and self._stub_held):
            self._pending_merges = clip.voice_merges + self._pending_merges  # nothing stored: the next clip
        if clip.is_empty() and not stub:
            return []
        self._window += 1
        return [] if clip.is_empty() else [clip]

    def checkpoint(self) -> dict:
        """Where the windows are, as JSON-able data, without the open window's evidence: a resumed
        replay restores it at a point where that window's clip is already stored (m3_agent.replay).
        Voice merges not stored yet (the open window's, the pending ones) are kept."""
        clip = self._open
        return {
            "first_index": self.first_index,
            "origin": self._origin,
            "window": self._window,
            "last_stamp_ns": self.last_stamp_ns,
            "stamps": self.stamps.state(),
            "open": None if clip is None else [clip.clip_index, clip.start_ns, clip.end_ns],
            "open_held": clip is not None and (not clip.is_empty() or (self._stub and self._stub_held)),
            "open_merges": [] if clip is None else [list(m) for m in clip.voice_merges],
            "pending_merges": [list(m) for m in self._pending_merges],
        }

    def restore(self, state: dict) -> None:
        """Continue from a checkpoint. The open window comes back empty (its clip is stored already)
        but closes as it would have, so the windows after it get the same indices; its voice merges go
        where the original's went (stored with it when it held evidence, else to the next clip)."""
        origin, opened = state["origin"], state["open"]
        self.first_index, self._window = int(state["first_index"]), int(state["window"])
        self._origin = None if origin is None else int(origin)
        self.last_stamp_ns = int(state["last_stamp_ns"])
        self.stamps.restore(state["stamps"])
        self._open = None if opened is None else ClipEvidence(*(int(v) for v in opened))
        self._stub = opened is not None
        self._stub_held = bool(state.get("open_held", True))  # checkpoints before voice revisions: held
        if self._open is not None:
            self._open.voice_merges = [(str(a), str(b)) for a, b in state.get("open_merges", [])]
        self._pending_merges = [(str(a), str(b)) for a, b in state.get("pending_merges", [])]

    def _admit(self, start_ns: int, end_ns: int) -> list[ClipEvidence]:
        """Check the stamps; when the stream moved to a new time, close the open window and restart
        the windows there (indices continue after the last one)."""
        if not self.stamps.admit(start_ns, end_ns):
            return []
        closed = self.flush()
        self.first_index += self._window
        self._window, self._origin, self.last_stamp_ns = 0, start_ns, start_ns
        return closed

    def _advance(self, stamp_ns: int) -> list[ClipEvidence]:
        self.last_stamp_ns = max(self.last_stamp_ns, stamp_ns)
        if self._origin is None:
            self._origin = stamp_ns
        closed: list[ClipEvidence] = []
        if self._open is not None and stamp_ns >= self._open.end_ns + self.close_delay_ns:
            closed = self.flush()
        if self._open is None:
            self._window = max(self._window, self._window_of(stamp_ns))
        return closed

    def _ensure_open(self) -> ClipEvidence:
        if self._open is None:
            start = self._origin + self._window * self.clip_ns
            self._open = ClipEvidence(self.first_index + self._window, start, start + self.clip_ns)
            self._open.voice_merges, self._pending_merges = self._pending_merges, []
        return self._open


class ClipCloser:
    """When a running memory node closes the open window although no later evidence came (issue 21, D8).

    - On the stream clock: perception's processed_until, and the node's clock (/clock under
      use_sim_time, the system clock live), once it passes the window's end + close_delay, exactly as
      evidence stamped there would. A reading counts only while it agrees with the evidence stamps
      (within two windows of the newest), so a clock on another time base (wall-clock time against a
      recording's media time) never cuts a clip short.
    - After an idle time: when nothing at all arrived for `idle_close_s` of wall time, no evidence
      and no advance of processed_until or /clock, the stream has stopped (a recording ended,
      perception went away): the open window closes as it would at the end of `m3 replay`.
      Idle is the stream clock standing still: while a replay runs, at any rate, processed_until or
      /clock keep moving between two messages of one clip, so wall time alone never closes it early.
      Only wall time with no input at all does (the live robot, or a perception that stalls longer
      than idle_close_s: that clip is stored, and what comes after joins the next window).
    `m3 replay` does not use it: its clips close on evidence and at the end of the recording.
    """

    def __init__(self, windows: ClipWindows, idle_close_s: float) -> None:
        if idle_close_s <= 0:
            raise ValueError("clip_idle_close_s must be > 0")
        self.windows = windows
        self.idle_ns = int(idle_close_s * NS)
        self._readings: dict[str, int] = {}  # source -> its last reading
        self._fresh: dict[str, int] = {}  # readings that moved since the last tick
        self._input_wall_ns: int | None = None  # wall time of the last input of any kind

    def heard(self, wall_ns: int) -> None:
        """Evidence arrived (even evidence then dropped for its stamp): the stream runs."""
        self._input_wall_ns = wall_ns

    def clock(self, source: str, stream_ns: int, wall_ns: int) -> None:
        """A stream clock reading ("progress": processed_until, "sim": /clock); one that moved is input."""
        if self._readings.get(source) != stream_ns:
            self._readings[source] = self._fresh[source] = stream_ns
            self._input_wall_ns = wall_ns

    def on_clock(self, system_ns: int | None = None) -> list[ClipEvidence]:
        """The clips the stream clock closes: the readings that moved since the last call, and
        system_ns (the live system clock, no input of its own), where they agree with the evidence."""
        readings = [*self._fresh.values(), *([] if system_ns is None else [system_ns])]
        self._fresh.clear()
        last, span = self.windows.last_stamp_ns, 2 * self.windows.clip_ns
        agreeing = [now for now in readings if last and abs(now - last) < span]
        return self.windows.tick(max(agreeing)) if agreeing else []

    def on_idle(self, wall_ns: int) -> list[ClipEvidence]:
        """The open window, when nothing at all arrived for idle_close_s of wall time (the stream stopped)."""
        if self._input_wall_ns is None or wall_ns - self._input_wall_ns < self.idle_ns:
            return []
        return self.windows.flush()
