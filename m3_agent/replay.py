"""Replay a recording through perception and memory in one process, into a memory directory.

Unlike playing the bag to running nodes, nothing can be dropped here: every frame the perception
rate asks for and every audio chunk is processed, in stream-time order, as fast as the CPU allows.
The result is the same memory the nodes build from a live stream (same pipelines, same
parameters from config/m3.yaml). An interrupted replay resumes: clips already stored are kept and
the recording is read again from the first clip that is missing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import yaml

from m3_agent.recording.bag_reader import ReadStatus, bag_info, iter_deserialized
from m3_agent.recording.typestore import AUDIO_CHUNK, COMPRESSED_IMAGE

RAW_IMAGE = "sensor_msgs/msg/Image"
STATE_FILE = "replay.json"
NS = 1_000_000_000


def node_parameters(params_file: str | Path, node: str, defaults: dict) -> dict:
    """The node's ros__parameters from the YAML over its declared defaults; unknown names are errors."""
    data = yaml.safe_load(Path(params_file).read_text()) or {}
    given = ((data.get(node) or {}).get("ros__parameters")) or {}
    unknown = set(given) - set(defaults)
    if unknown:
        raise ValueError(f"{params_file}: unknown {node} parameter(s) {sorted(unknown)}")
    return {**defaults, **given}


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


def _pick_topic(topics: dict[str, tuple[str, int]], types: tuple[str, ...], wanted: str) -> str | None:
    if wanted in topics and topics[wanted][0] in types:
        return wanted
    candidates = [t for t, (msgtype, _) in topics.items() if msgtype in types]
    return candidates[0] if len(candidates) == 1 else None


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

        self.perception_params = node_parameters(
            params_file, "perception_node", {k: v[0] for k, v in PERCEPTION_PARAMETERS.items()}
        )
        self.memory_params = node_parameters(
            params_file, "memory_node", {k: v[0] for k, v in MEMORY_PARAMETERS.items()}
        )
        self.perception_params.update((overrides or {}).get("perception_node", {}))
        self.memory_params.update((overrides or {}).get("memory_node", {}))
        self.memory_params["memory_dir"] = str(memory_dir)
        self.memory_dir = Path(memory_dir).expanduser().resolve()
        self.memory = memory or open_memory(self.memory_params)
        self.faces, self.voices, self.matcher = build_pipelines(self.perception_params)

    def close(self) -> None:
        self.voices.close()
        self.memory.close()

    def _state(self, bag: Path, start_ns: int) -> tuple[int, float]:
        """(first clip index for this bag, seconds of the bag to skip) — resuming the same bag."""
        clip_s = float(self.memory_params["clip_seconds"])
        state_path = self.memory_dir / STATE_FILE
        next_index = self.memory.next_clip_index
        if state_path.exists():
            state = json.loads(state_path.read_text())
            if state.get("bag") == str(bag) and state.get("bag_start_ns") == start_ns:
                first = int(state["first_clip_index"])
                return first, max(0.0, (next_index - first) * clip_s)
        state = {"bag": str(bag), "bag_start_ns": start_ns, "first_clip_index": next_index}
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, state_path)  # atomic: a kill never leaves a torn state file
        return next_index, 0.0

    def run(self, bag: str | Path, progress: Callable[[float, float], None] | None = None) -> ReplayReport:
        from m3_memory.assembly import clip_ingester, clip_windows
        from m3_memory.records import MATCH_FACE, MATCH_VOICE, FaceEvidence, MatchEvidence, VoiceEvidence
        from m3_perception.audio_codec import AudioDecodeError, AudioLimits, decode_chunk
        from m3_perception.image_codec import ImageDecodeError, decode_compressed, decode_raw, encode_jpeg
        from m3_perception.stamps import StampGuard, StampRejected, header_ns

        bag = Path(bag).resolve()
        info = bag_info(bag)
        p = self.perception_params
        wanted_image = p["image_topic"].rstrip("/") + ("/compressed" if p["image_transport"] == "compressed" else "")
        image_topic = _pick_topic(info.topics, (COMPRESSED_IMAGE, RAW_IMAGE), wanted_image)
        audio_topic = _pick_topic(info.topics, (AUDIO_CHUNK,), p["audio_topic"])
        if image_topic is None and audio_topic is None:
            raise ValueError(f"{bag} has no camera or AudioChunk topic I can choose; it has {sorted(info.topics)}")
        first_index, skip_s = self._state(bag, info.start_ns)
        windows = clip_windows(self.memory_params, first_index, origin_ns=info.start_ns)
        # The perception node's input checks: stamps per input, then bounded decoding.
        stamps = {topic: StampGuard(p["max_stamp_jump_s"]) for topic in (image_topic, audio_topic) if topic}
        audio_limits = AudioLimits(p["audio_sample_rate_min"], p["audio_sample_rate_max"], p["max_audio_chunk_s"])
        min_gap_s = 1.0 / p["face_rate_hz"]
        counts = {"frames": 0, "faces": 0, "utterances": 0, "matches": 0, "clips": 0}
        status = ReadStatus()
        last_frame_s: float | None = None

        # Memorization runs beside perception on the ingester's thread, clips in order.
        ingester = clip_ingester(self.memory_params, self.memory)

        def store(clips) -> None:
            for clip in clips:
                ingester.submit(clip)

        def add(item) -> None:
            try:
                store(windows.add(item))
            except StampRejected as error:  # evidence the clip windows refuse (as the memory node drops it)
                status.skip("clip windows", str(error), "stamp")

        def on_voice_events(events) -> None:
            for event in events:
                counts["utterances"] += 1
                if not event.voice_id:
                    # Too short to tell who spoke (a short turn near no known voice, a word cut off by the end
                    # of a truncated recording): the memory node drops such a segment, and the memory refuses
                    # a clip holding one.
                    continue
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

        started = time.perf_counter()
        topics = [t for t in (image_topic, audio_topic) if t]
        try:
            for message, msg in iter_deserialized(bag, topics, skip_s, status):
                stamp_s = (message.timestamp_ns - info.start_ns) / NS
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
                except (AudioDecodeError, ImageDecodeError, StampRejected) as error:
                    status.skip(message.topic, f"{error} (at {stamp_s:.3f} s)")  # as the nodes drop it
                if progress is not None:
                    progress(stamp_s, info.duration_s)
            on_voice_events(self.voices.flush())
            store(windows.flush())
        except BaseException:
            ingester.abandon()  # clips not stored yet are redone when the replay resumes
            raise
        perceived = time.perf_counter()
        stats = ingester.close(None)  # a replay waits for its memorizer: resuming redoes what is missing
        wall = time.perf_counter() - started
        counts["clips"] = stats.stored
        summary = stats.summary()
        stream = max(0.0, info.duration_s - skip_s)
        return ReplayReport(
            str(bag),
            str(self.memory_dir),
            first_index + int(skip_s // self.memory_params["clip_seconds"]),
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
            **status.summary(),
        )


def replay(
    bag: str | Path,
    memory_dir: str | Path,
    params_file: str | Path,
    show_progress: bool = False,
    overrides: dict[str, dict[str, object]] | None = None,
) -> dict:
    """Replay `bag` into `memory_dir`; the report as a dict. A tqdm bar on stderr if asked."""
    from tqdm import tqdm

    total_s = round(bag_info(bag).duration_s, 1)  # an unreadable recording fails here, before any memory
    replayer = Replayer(memory_dir, params_file, overrides=overrides)
    try:
        with tqdm(total=total_s, unit="s", desc="replay", disable=not show_progress) as bar:

            def progress(done_s: float, _total_s: float) -> None:
                bar.update(round(done_s, 1) - bar.n)

            return asdict(replayer.run(bag, progress))
    finally:
        replayer.close()
