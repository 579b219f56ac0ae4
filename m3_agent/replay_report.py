"""What `m3 replay` says when it ends (its JSON line) or is stopped: ReplayReport and ReplayStopped."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ReplayReport:
    bag: str
    memory_dir: str
    resumed_from_clip: int
    stream_s: float
    wall_s: float
    realtime_factor: float
    frames_processed: int
    faces_observed: int
    utterances: int
    matches: int
    clips_stored: int
    bad_messages: int  # messages skipped: CDR that does not deserialize, or content that does not decode
    clips_degraded: int = 0  # stored by the rules memorizer after the model failed (see the memory's log)
    memorize_s_per_clip: float = 0.0  # mean seconds a clip took to memorize and store (beside perception)
    memory_ready_after_s: float = 0.0  # seconds from the end of perception until the last clip was stored
    skipped_messages: dict[str, int] = field(default_factory=dict)  # topic -> messages skipped (bad_messages)
    messages_read: int = 0  # messages of the replayed topics read from the recording
    read_until_s: float = 0.0  # stream time of the last message read, from the recording's start
    bag_truncated: bool = False  # the recording is damaged: only the part before the damage was replayed
    bag_problem: str = ""  # what is wrong with the recording ("" = nothing)
    resumed_at_s: float = 0.0  # stream time this run read from: a perception snapshot's, or 0 (the start)
    snapshot_clip: int = -1  # the clip whose perception snapshot this run resumed from (-1: none, cold start)
    stopped: str = ""  # "sigterm" or "sigint" when a signal stopped it at read_until_s ("" = it ran to the end)
    voice_corrections_late: int = 0  # perception's voice corrections of utterances whose clip had closed


class ReplayStopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the replay; `report` (a ReplayReport dict) says where: clips stored so far,
    read_until_s. Raised once the memory is consistent (a resume goes on from there) and closed."""

    def __init__(self, report: dict) -> None:
        super().__init__(report["stopped"])
        self.report = report
        self.signal_name = report["stopped"]  # as node_shutdown.StopRequested: stop_name() reads it
