"""Replay a recording through perception and memory in one process, into a memory directory.

Unlike playing the bag to running nodes, nothing can be dropped here: every frame the perception
rate asks for and every audio chunk is processed, in stream-time order, as fast as the CPU allows.
The result is the same memory the nodes build from a live stream (same pipelines, same
parameters from config/m3.yaml). An interrupted replay resumes: clips already stored are kept and
the recording is read again from the first clip that is missing. Ctrl-C or SIGTERM stops it between
messages: the clips already closed are kept or redone on resume, the store is closed, and the report
(ReplayStopped) says where it stopped.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from m3_agent.recording.bag_reader import ReadStatus, bag_info, iter_deserialized
from m3_agent.recording.typestore import AUDIO_CHUNK, COMPRESSED_IMAGE
from m3_agent.replay_report import ReplayReport, ReplayStopped
from m3_agent.replay_seeing import ReplaySeeing
from m3_agent.replay_state import Snapshots, fingerprint
from m3_agent.replay_state import capture as capture_snapshot
from m3_agent.replay_state import restore as restore_snapshot
from m3_agent.replay_topics import RAW_IMAGE, pick_topic, pose_reader
from m3_runtime.node_shutdown import stop_name
from m3_runtime.parameter_checks import node_parameters
from m3_runtime.state_file import StateError

STATE_FILE = "replay.json"
NS = 1_000_000_000
log = logging.getLogger("m3_agent.replay")


def apply_voice_updates(voices, matcher, windows) -> int:
    """Perception's revisions of voices it returned before (VoicePipeline.take_updates) applied to the
    face-voice matcher (as the perception engine does) and to the clip windows (as the memory node applies
    IdentityUpdate); returns the corrections that came too late."""
    from m3_memory.graph.records import VoiceRevision

    late = 0
    for update in voices.take_updates():
        for gone, keep in update.merges:
            matcher.merge_voice(gone, keep)
        for voice, new, face in update.splits:
            matcher.split_voice(voice, new, face)
        late += windows.revise(VoiceRevision(round(update.stamp * NS), list(update.merges), list(update.corrections)))
    return late


class Replayer:
    """Loads the perception pipelines and opens the memory once; `run` replays one recording."""

    def __init__(
        self,
        memory_dir: str | Path,
        params_file: str | Path,
        memory=None,
        overrides: dict[str, dict[str, object]] | None = None,
    ) -> None:
        """overrides: per-node parameter values over the file's (e.g. the LLM profile's memorizer)."""
        from m3_memory.assembly import open_memory
        from m3_memory.memory_node import PARAMETERS as MEMORY_PARAMETERS
        from m3_perception.assembly import build_pipelines
        from m3_perception.perception_node import PARAMETERS as PERCEPTION_PARAMETERS

        overrides = overrides or {}
        self.perception_params = node_parameters(
            params_file, "perception_node", PERCEPTION_PARAMETERS, overrides.get("perception_node")
        )
        self.memory_params = node_parameters(
            params_file, "memory_node", MEMORY_PARAMETERS, overrides.get("memory_node")
        )
        self.memory_params["memory_dir"] = str(memory_dir)
        self.memory_dir = Path(memory_dir).expanduser().resolve()
        self.memory = memory or open_memory(self.memory_params)
        try:
            self.seeing = ReplaySeeing(self.perception_params)  # objects and text (off by default): checked first
            self.faces, self.voices, self.matcher = build_pipelines(self.perception_params)
        except BaseException:  # a bad model file, or Ctrl-C while loading: the store is closed all the same
            if memory is None:
                self.memory.close()
            raise

    def close(self) -> None:
        self.voices.close()
        self.memory.close()

    def _state(self, bag: Path, start_ns: int) -> tuple[int, int]:
        """(first clip index for this bag, first clip the memory lacks) — resuming the same bag."""
        state_path = self.memory_dir / STATE_FILE
        next_index = self.memory.next_clip_index
        if state_path.exists():
            state = json.loads(state_path.read_text())
            if state.get("bag") == str(bag) and state.get("bag_start_ns") == start_ns:
                return int(state["first_clip_index"]), next_index
        Snapshots(self.memory_dir, {}).clear()  # another recording's: of no use to this one
        state = {"bag": str(bag), "bag_start_ns": start_ns, "first_clip_index": next_index}
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, state_path)  # atomic: a kill never leaves a torn state file
        return next_index, next_index

    def _fingerprint(self, bag: Path, start_ns: int, first_index: int) -> dict:
        m = self.memory_params
        windows = {k: m[k] for k in ("clip_seconds", "clip_close_delay", "max_stamp_jump_s")}
        return fingerprint(bag, start_ns, first_index, {"perception": self.perception_params, "windows": windows})

    def _resume(self, snapshots: Snapshots, next_index: int, fresh: Callable[[], tuple]) -> tuple:
        """(windows, stamp guards, last frame's stamp, position, snapshot label or None) to go on from:
        the newest usable snapshot at or before clip `next_index`, else the recording's start."""
        for label, meta, arrays in snapshots.candidates(next_index):
            windows, stamps = fresh()
            try:
                last_frame_s, position = restore_snapshot(
                    meta, arrays, (self.faces, self.voices, self.matcher), windows, stamps
                )
            except StateError as error:
                log.warning(
                    "perception snapshot %s is not usable, trying an older one: %s", snapshots.path(label), error
                )
                continue
            return windows, stamps, last_frame_s, position, label
        log.warning(
            "no usable perception snapshot for clip %d in %s: replaying the recording from its start so that "
            "perception knows the same people (clips before %d are kept and not stored again)",
            next_index,
            snapshots.dir,
            next_index,
        )
        return (*fresh(), None, {"offset_ns": 0, "skip": 0, "at_end": False}, None)

    def run(self, bag: str | Path, progress: Callable[[float, float], None] | None = None) -> ReplayReport:
        from m3_memory.assembly import clip_ingester, clip_windows
        from m3_memory.graph.records import MATCH_FACE, MATCH_VOICE, FaceEvidence, MatchEvidence, VoiceEvidence
        from m3_memory.pose_input import pose_sample
        from m3_runtime.audio_codec import AudioDecodeError, AudioLimits, decode_chunk
        from m3_runtime.image_codec import ImageDecodeError, decode_compressed, decode_raw, encode_jpeg
        from m3_runtime.stamps import StampGuard, StampRejected, header_ns

        bag = Path(bag).resolve()
        info = bag_info(bag)
        p = self.perception_params
        wanted_image = p["image_topic"].rstrip("/") + ("/compressed" if p["image_transport"] == "compressed" else "")
        image_topic = pick_topic(info.topics, (COMPRESSED_IMAGE, RAW_IMAGE), wanted_image)
        audio_topic = pick_topic(info.topics, (AUDIO_CHUNK,), p["audio_topic"])
        if image_topic is None and audio_topic is None:
            raise ValueError(f"{bag} has no camera or AudioChunk topic I can choose; it has {sorted(info.topics)}")
        pose_topic, track, pose_of = pose_reader(self.memory_params, info.topics)
        first_index, next_index = self._state(bag, info.start_ns)
        audio_limits = AudioLimits(p["audio_sample_rate_min"], p["audio_sample_rate_max"], p["max_audio_chunk_s"])
        min_gap_s = 1.0 / p["face_rate_hz"]
        counts = {"frames": 0, "faces": 0, "utterances": 0, "matches": 0, "clips": 0, "late": 0}
        status = ReadStatus()
        snapshots = Snapshots(self.memory_dir, self._fingerprint(bag, info.start_ns, first_index))

        def fresh() -> tuple:
            # The perception node's input checks: stamps per input, then bounded decoding.
            guards = {topic: StampGuard(p["max_stamp_jump_s"]) for topic in (image_topic, audio_topic) if topic}
            return clip_windows(self.memory_params, first_index, origin_ns=info.start_ns), guards

        if next_index > first_index:
            windows, stamps, last_frame_s, position, resumed_label = self._resume(snapshots, next_index, fresh)
        else:
            windows, stamps = fresh()
            last_frame_s, position, resumed_label = None, {"offset_ns": 0, "skip": 0, "at_end": False}, None
        clip_ns = windows.clip_ns
        next_label = first_index if resumed_label is None else resumed_label + 1  # the next snapshot's clip
        closed_max = [next_index - 1]  # highest clip index closed so far (stored, or given to the ingester)

        def snapshot(label: int, where: dict) -> None:
            """Save the state before clip `label`'s window, when nothing of that clip exists yet."""
            opened = windows.checkpoint()["open"]
            if closed_max[0] >= label or (opened is not None and opened[0] >= label):
                return  # the stream's stamps run ahead of the recording's: this point is no clip start
            pipelines = (self.faces, self.voices, self.matcher)
            snapshots.save(label, *capture_snapshot(pipelines, windows, stamps, last_frame_s, where))
            snapshots.prune(self.memory.next_clip_index)

        # Memorization runs beside perception on the ingester's thread, clips in order.
        ingester = clip_ingester(self.memory_params, self.memory)

        def store(clips) -> None:
            for clip in clips:
                closed_max[0] = max(closed_max[0], clip.clip_index)
                if track is not None:  # the robot's path through the clip, as the memory node keeps it
                    clip.path = track.between(clip.start_ns, clip.end_ns)
                if clip.clip_index >= next_index:  # earlier ones are stored already (a resume re-reads them)
                    ingester.submit(clip)

        def add(item) -> None:
            try:
                store(windows.add(item))
            except StampRejected as error:  # evidence the clip windows refuse (as the memory node drops it)
                status.skip("clip windows", str(error), "stamp")

        def on_voice_events(events) -> None:
            for event in events:
                counts["utterances"] += 1
                self.voices.attribute(event, self.matcher.dominant_face(event.start, event.end))
                # voice_id "" (too short to tell who spoke, or overlap): kept, as the memory node keeps it; the
                # memory stores the line as said by someone unclear, and a revision may still name the voice.
                add(
                    VoiceEvidence(
                        event.voice_id,
                        round(event.start * NS),
                        round(event.end * NS),
                        event.transcript.text,
                        float(event.transcript.confidence),
                        event.embedding.tolist(),
                        event.segment_id,
                    )
                )
                match = self.matcher.on_utterance(event.voice_id, event.start, event.end)
                if match is not None:
                    counts["matches"] += 1
                    add(
                        MatchEvidence(
                            match.face_id,
                            match.voice_id,
                            match.confidence,
                            match.evidence_count,
                            round(match.stamp * NS),
                            MATCH_FACE,
                            MATCH_VOICE,
                        )
                    )
            counts["late"] += apply_voice_updates(self.voices, self.matcher, windows)  # after the events they revise

        started = time.perf_counter()
        topics = [t for t in (image_topic, audio_topic, pose_topic) if t]
        offset_s = position["offset_ns"] / NS
        messages = [] if position["at_end"] else iter_deserialized(bag, topics, offset_s, status, position["skip"])
        stopped = ""
        try:
            for message, msg in messages:
                stamp_s = (message.timestamp_ns - info.start_ns) / NS
                label = first_index + (message.timestamp_ns - info.start_ns) // clip_ns
                if label >= next_label:
                    # A damaged recording is read in file order, not by time: its position is a count.
                    if status.problem:
                        where = {"offset_ns": round(offset_s * NS), "skip": status.messages_read - 1, "at_end": False}
                    else:
                        where = {"offset_ns": message.timestamp_ns - info.start_ns, "skip": 0, "at_end": False}
                    snapshot(label, where)
                    next_label = label + 1
                if message.topic == pose_topic:
                    try:
                        sample = pose_sample(msg, pose_of)
                        if sample.frame_id != track.frame_id:
                            raise ValueError(f"frame {sample.frame_id!r}, not pose_frame_id {track.frame_id!r}")
                        track.add(sample)  # False for a repeated or older stamp: not an error
                    except (ValueError, AttributeError) as error:
                        status.skip(message.topic, f"unusable pose: {error} (at {stamp_s:.3f} s)")
                    continue
                header_s = msg.header.stamp.sec + msg.header.stamp.nanosec / NS
                try:
                    if stamps[message.topic].admit(header_ns(msg.header.stamp.sec, msg.header.stamp.nanosec)):
                        if message.topic == audio_topic:
                            on_voice_events(self.voices.flush())  # the stream moved: no utterance spans it
                    if message.topic == audio_topic:
                        samples = decode_chunk(
                            msg.sample_rate, msg.channels, msg.sample_format, msg.data, msg.coding_format, audio_limits
                        )
                        on_voice_events(self.voices.feed(samples, header_s))
                    elif last_frame_s is None or header_s - last_frame_s >= min_gap_s - 1e-6:
                        last_frame_s = header_s
                        if message.msgtype == COMPRESSED_IMAGE:
                            rgb = decode_compressed(msg.format, msg.data, p["max_image_pixels"])
                        else:
                            rgb = decode_raw(
                                msg.encoding, msg.width, msg.height, msg.step, msg.data, p["max_image_pixels"]
                            )
                        counts["frames"] += 1
                        stamp_ns = round(header_s * NS)
                        if windows.wants_keyframe(stamp_ns):
                            recorded_jpeg = message.msgtype == COMPRESSED_IMAGE and "jpeg" in msg.format
                            jpeg = bytes(msg.data) if recorded_jpeg else encode_jpeg(rgb, 80)
                            store(windows.add_keyframe(stamp_ns, jpeg))
                        observations = self.faces.process(rgb, header_s)
                        self.matcher.observe_faces(header_s, [(o.face_id, o.box[2] * o.box[3]) for o in observations])
                        for o in observations:
                            if o.face_id:
                                counts["faces"] += 1
                                add(
                                    FaceEvidence(
                                        o.face_id,
                                        o.track_id,
                                        tuple(float(v) for v in o.box),
                                        float(o.score),
                                        stamp_ns,
                                        np.asarray(o.embedding).tolist(),
                                        o.crop_jpeg,
                                        float(o.quality),
                                    )
                                )
                        for item in self.seeing.evidence(rgb, header_s):  # objects and written text
                            add(item)
                except (AudioDecodeError, ImageDecodeError, StampRejected) as error:
                    status.skip(message.topic, f"{error} (at {stamp_s:.3f} s)")  # as the nodes drop it
                if progress is not None:
                    progress(stamp_s, info.duration_s)
            on_voice_events(self.voices.flush())
            store(windows.flush())
            if not position["at_end"]:
                snapshot(closed_max[0] + 1, {"offset_ns": 0, "skip": 0, "at_end": True})  # a re-run reads nothing
        except KeyboardInterrupt as interrupt:  # Ctrl-C, SIGTERM: the open clip is left to the resume
            stopped = stop_name(interrupt)
        except BaseException:
            ingester.abandon()  # clips not stored yet are redone when the replay resumes
            raise
        perceived = time.perf_counter()
        try:
            if stopped:
                ingester.abandon()  # the clip being stored is stored; the queued ones are redone on resume
            else:
                ingester.close(None)  # a replay waits for its memorizer: resuming redoes what is missing
        except KeyboardInterrupt as interrupt:  # stopped while the memorizer catches up
            stopped = stop_name(interrupt)
            ingester.abandon()
        stats = ingester.stats
        wall = time.perf_counter() - started
        counts["clips"] = stats.stored
        summary = stats.summary()
        snapshots.prune(self.memory.next_clip_index)
        resumed_at_s = info.duration_s if position["at_end"] else offset_s
        stream = max(0.0, info.duration_s - resumed_at_s)
        return ReplayReport(
            str(bag),
            str(self.memory_dir),
            next_index,
            round(stream, 3),
            round(wall, 3),
            round(stream / wall, 3) if wall > 0 else 0.0,
            counts["frames"],
            counts["faces"],
            counts["utterances"],
            counts["matches"],
            counts["clips"],
            sum(status.skipped.values()),
            stats.degraded,
            summary["memorize_s_per_clip"],
            round(time.perf_counter() - perceived, 3),
            read_until_s=round(max(0, status.read_until_ns - info.start_ns) / NS, 3),
            resumed_at_s=round(resumed_at_s, 3),
            snapshot_clip=-1 if resumed_label is None else resumed_label,
            stopped=stopped,
            voice_corrections_late=counts["late"],
            **status.summary(),
        )


def replay(
    bag: str | Path,
    memory_dir: str | Path,
    params_file: str | Path,
    show_progress: bool = False,
    overrides: dict[str, dict[str, object]] | None = None,
) -> dict:
    """Replay `bag` into `memory_dir`; the report as a dict. A tqdm bar on stderr if asked. Ctrl-C or
    SIGTERM: ReplayStopped, carrying the report, once the memory is closed."""
    from tqdm import tqdm

    total_s = round(bag_info(bag).duration_s, 1)  # an unreadable recording fails here, before any memory
    replayer = Replayer(memory_dir, params_file, overrides=overrides)
    try:
        # miniters=0: a resume jumps the bar by the stream it skips, and tqdm's dynamic miniters then
        # printed only every ~10 s of stream (a kill-at-moment test overshot into the episode's end).
        with tqdm(total=total_s, unit="s", desc="replay", miniters=0, disable=not show_progress) as bar:

            def progress(done_s: float, _total_s: float) -> None:
                bar.update(round(done_s, 1) - bar.n)

            report = asdict(replayer.run(bag, progress))
    finally:
        replayer.close()
    if report["stopped"]:
        raise ReplayStopped(report)
    return report
