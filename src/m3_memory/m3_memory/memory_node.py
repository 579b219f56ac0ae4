"""ROS 2 adapter of the memory: parameters, QoS, message <-> dataclass conversions; no memory logic here.

Subscribes /m3/faces, /m3/voices, /m3/entity_matches, /m3/identities/voice_updates (revisions of
voices, applied to the clip not yet stored: m3_memory.clip_window), optionally a camera topic for
keyframes and the robot's pose topic (each clip keeps its path, each memory its place: m3_memory.pose_input),
groups evidence into clip windows on the stream clock (closed by later evidence, by the stream clock, and when
the stream stops: m3_memory.clip_window), stores each closed clip (one transaction) and
publishes it on /m3/memory/clips; serves /m3/memory/{search_node,search_clip,get_entity,get_names,get_stats,
locate_entity} (m3_memory.memory_services).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rosgraph_msgs.msg import Clock as ClockMsg

from m3_interfaces.msg import (
    ClipMemory,
    EntityMatch,
    FaceTracks,
    IdentityUpdate,
    ObjectTracks,
    TextRegions,
    VoiceSegment,
)
from m3_interfaces.srv import GetEntity, GetNames, GetStats, LocateEntity, SearchClip, SearchNode
from m3_memory.assembly import clip_ingester, clip_windows, load_regions, make_memorizer, memory_location, open_memory
from m3_memory.clip_window import ClipCloser, ClipWindows
from m3_memory.errors import ModelMissingError, StoreError
from m3_memory.evidence_msgs import (
    face_evidence,
    match_evidence,
    seen_evidence,
    voice_evidence,
    voice_revision,
)
from m3_memory.graph.records import ClipEvidence, ClipRecord
from m3_memory.graph.tags import kind_of
from m3_memory.hri_output import HriPersonsOutput
from m3_memory.ingest_worker import ClipIngester
from m3_memory.memory import Memory
from m3_memory.memory_msgs import clip_msg, to_ns, to_time
from m3_memory.memory_services import MemoryServicesMixin
from m3_memory.node_parameters import PARAMETERS
from m3_memory.pose_input import PoseInput
from m3_memory.robot_ids import check_robot_id
from m3_memory.search.query_encoders import QueryEncoders
from m3_runtime.managed_node import ManagedNode, run_node
from m3_runtime.parameter_checks import declare_checked
from m3_runtime.stamps import StampRejected

NODE_NAME = "memory_node"
TICK_S = 0.5  # how often the stream clock and the idle time are looked at (steady time) [s]


class MemoryNode(MemoryServicesMixin, ManagedNode):
    """Thin adapter around m3_memory.memory.Memory; a managed node (m3_runtime.managed_node): the store
    opens on configure, evidence and services go live on activate, the store closes on cleanup."""

    def __init__(self, embedder=None, **kwargs) -> None:
        """embedder: an already loaded TextEmbedder to share (tests, one-process bring-up); None loads one."""
        super().__init__(NODE_NAME, **kwargs)
        declare_checked(self, PARAMETERS)  # a bad value or unknown name fails configure, never a traceback
        self.embedder = embedder
        self.memory_dir = memory_location({name: self.get_parameter(name).value for name in PARAMETERS})
        self.memory: Memory | None = None
        self.ingester: ClipIngester | None = None
        self.hri: HriPersonsOutput | None = None
        self.store_error = "memory node not configured"
        self.bad_stamps = 0
        self.late_corrections = 0  # voice corrections of utterances stored already (reported, not applied)
        self.clips_stored = 0
        self.windows: ClipWindows | None = None
        self.poses: PoseInput | None = None
        self.closer: ClipCloser | None = None
        self._ingest_lock = threading.Lock()

    def configure(self) -> None:
        p = {name: self.get_parameter(name).value for name in PARAMETERS}
        check_robot_id(p["robot_id"])  # an invalid id fails configure: it is written into Milvus keys and filters
        self.memory_dir = memory_location(p)  # a directory, or a Milvus URI
        self.store_error = ""
        self.encoders = QueryEncoders(max_image_pixels=p["max_image_pixels"], max_audio_s=p["max_query_audio_s"])
        memorizer = make_memorizer(p)  # a bad memorizer setting fails configure
        regions = load_regions(p)  # so does a bad regions file or pose_type
        self.poses = None
        if p["pose_topic"]:
            self.poses = PoseInput(self, p["pose_topic"], p["pose_type"], p["pose_frame_id"], p["pose_wait_s"])
        try:
            self.memory = open_memory(p, self.embedder, memorizer, regions)
        except (StoreError, ValueError, ModelMissingError) as error:
            # The node still configures so callers get STORE_UNAVAILABLE with the reason instead of silence.
            self.store_error = f"memory store {self.memory_dir} unavailable: {error}"
            self.get_logger().error(self.store_error)
        first_index = self.memory.next_clip_index if self.memory else 0
        self.windows = clip_windows(p, first_index)
        self.closer = ClipCloser(self.windows, p["clip_idle_close_s"])
        if p["memorizer"] == "openai" and p["openai_keyframes"] > 0 and not p["keyframe_topic"]:
            self.get_logger().warning("openai_keyframes > 0 but keyframe_topic is empty: the model gets no frames")
        self.drain_s = float(p["memorize_drain_s"])
        self.clip_pub = self.lifecycle_publisher(
            ClipMemory,
            "m3/memory/clips",
            QoSProfile(
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
                history=HistoryPolicy.KEEP_LAST,
                depth=10,
            ),
        )
        if self.memory is not None:
            self.ingester = clip_ingester(p, self.memory, self._published, self._log)
            self.memory.search.unstored = self._unstored  # lines heard and not memorized yet are searchable
        self.hri = HriPersonsOutput.create(self, p["publish_hri"], self.memory)  # REP-155 persons, or None
        self.get_logger().info(
            f"memory_node: store {self.memory_dir}, memorizer {p['memorizer']}, clips of {p['clip_seconds']} s"
        )

    def go_live(self) -> None:
        evidence_qos = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST, depth=100)
        ingest_group = MutuallyExclusiveCallbackGroup()
        service_group = ReentrantCallbackGroup()
        # Deep request queues: the default (10) silently drops requests when many clients call at once.
        service_qos = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST, depth=1000)
        inputs = [(FaceTracks, "m3/faces", self._on_faces), (VoiceSegment, "m3/voices", self._on_voice)]
        inputs.append((EntityMatch, "m3/entity_matches", self._on_match))
        inputs.append((IdentityUpdate, "m3/identities/voice_updates", self._on_voice_update))
        # what perception's seeing worker found (objects and written text; off there by default)
        inputs += [(ObjectTracks, "m3/objects", self._on_seen), (TextRegions, "m3/texts", self._on_seen)]
        # perception's processed_until: the stream clock without use_sim_time (m3 run + m3 play, a live robot)
        inputs.append((ClockMsg, "m3/perception/processed_until", self._on_progress))
        for msg_type, topic, callback in inputs:
            self.live(self.create_subscription(msg_type, topic, callback, evidence_qos, callback_group=ingest_group))
        if self.poses is not None:
            self.live(self.poses.subscribe(ingest_group))
        keyframe_topic = self.get_parameter("keyframe_topic").value
        if keyframe_topic:
            from sensor_msgs.msg import Image

            self.live(
                self.create_subscription(
                    Image, keyframe_topic, self._on_image, qos_profile_sensor_data, callback_group=ingest_group
                )
            )
        for srv_type, name, callback in (
            (SearchNode, "search_node", self._search_node),
            (SearchClip, "search_clip", self._search_clip),
            (GetEntity, "get_entity", self._get_entity),
            (GetNames, "get_names", self._get_names),
            (GetStats, "get_stats", self._get_stats),
            (LocateEntity, "locate_entity", self._locate_entity),
        ):
            self.live(
                self.create_service(
                    srv_type, f"m3/memory/{name}", callback, qos_profile=service_qos, callback_group=service_group
                )
            )
        # Steady time: a /clock-driven timer (use_sim_time) would stop with the recording it should notice ending.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.live(self.create_timer(TICK_S, self._on_tick, callback_group=ingest_group, clock=steady))
        if self.hri is not None:
            self.hri.go_live()

    # -- evidence in --------------------------------------------------------------------------------
    def _valid_id(self, entity_id: str, kinds: tuple[str, ...]) -> bool:
        """Perception ids must be face_N / voice_N: anything else is dropped alone, with a warning."""
        kind = kind_of(entity_id)
        if kind in kinds:
            return True
        self.get_logger().warning(f"ignored evidence with malformed id {entity_id!r}", throttle_duration_sec=10.0)
        return False

    def _on_faces(self, msg: FaceTracks) -> None:
        stamp = to_ns(msg.header.stamp)
        for face in msg.faces:
            if not face.face_id:
                continue  # not yet identified by perception
            if self._valid_id(face.face_id, ("face",)):
                self._add(face_evidence(face, stamp))

    def _on_seen(self, msg: ObjectTracks | TextRegions) -> None:
        for item in seen_evidence(msg):
            self._add(item)

    def _on_voice(self, msg: VoiceSegment) -> None:
        # No voice id: the speaker is uncertain; the line is kept and names nobody (name_mentions).
        if msg.voice_id and not self._valid_id(msg.voice_id, ("voice",)):
            return
        self._add(voice_evidence(msg))

    def _on_match(self, msg: EntityMatch) -> None:
        if self._valid_id(msg.id1, ("face", "voice")) and self._valid_id(msg.id2, ("face", "voice")):
            self._add(match_evidence(msg))

    def _on_voice_update(self, msg: IdentityUpdate) -> None:
        """Perception revised earlier voices: the clip not yet stored takes the revision (merges reach
        stored clips when it is stored); corrections of stored utterances are reported, not applied."""
        try:
            revision = voice_revision(msg)
        except ValueError as error:
            self.get_logger().warning(f"ignored voice update: {error}", throttle_duration_sec=10.0)
            return
        with self._ingest_lock:
            late = self.windows.revise(revision)
            self.late_corrections += late
        if late:
            self.get_logger().warning(
                f"{late} voice correction(s) came after their clip was stored: not applied "
                f"({self.late_corrections} so far)"
            )

    def _on_image(self, msg) -> None:
        if not self.windows.wants_keyframe(to_ns(msg.header.stamp)):
            return
        try:
            from m3_runtime import image_codec

            rgb = image_codec.decode_raw(
                msg.encoding, msg.width, msg.height, msg.step, msg.data, self.encoders.max_image_pixels
            )
            jpeg = image_codec.encode_jpeg(rgb, 80)
        except (ImportError, ValueError) as error:
            self.get_logger().warning(f"keyframe skipped: {error}", throttle_duration_sec=30.0)
            return
        self._ingest(self.windows.add_keyframe, to_ns(msg.header.stamp), jpeg)

    def _add(self, item) -> None:
        self._ingest(self.windows.add, item)

    def _ingest(self, add: Callable[..., list], *args) -> None:
        """Into the clip windows (add or add_keyframe); evidence with a bad stamp is dropped, with a warning."""
        with self._ingest_lock:
            self.closer.heard(time.monotonic_ns())
            try:
                self._store(add(*args))
            except StampRejected as error:
                self.bad_stamps += 1
                self.get_logger().warning(
                    f"dropped evidence ({self.bad_stamps} so far): {error}", throttle_duration_sec=5.0
                )

    def _store(self, clips, everything: bool = False) -> None:
        """Hand closed clips to the memorizer worker (blocks only while its backlog is full); with a pose
        topic, each once its poses have come (PoseInput.with_paths; `everything`: the stream ended)."""
        if self.poses is not None:
            clips = self.poses.with_paths(clips, time.monotonic_ns(), everything)
        for clip in clips:
            if self.ingester is None:
                self.get_logger().error(f"clip {clip.clip_index} not stored: {self.store_error}")
                continue
            self.ingester.submit(clip)

    def _unstored(self) -> list[ClipEvidence]:
        """The clips waiting for the memorizer and the open window (search/heard.py), without the ingest
        lock: a search never waits behind evidence blocked on a full backlog."""
        waiting = self.ingester.waiting() if self.ingester is not None else []
        opened = self.windows.heard() if self.windows is not None else None
        return waiting + ([opened] if opened is not None else [])

    def _log(self, level: str, message: str) -> None:
        getattr(self.get_logger(), level)(message)

    def _published(self, record: ClipRecord) -> None:
        """Runs on the worker thread once a clip is stored."""
        self.clips_stored += 1
        try:
            self.clip_pub.publish(clip_msg(record))
            if self.hri is not None:  # REP-155 persons after this clip
                self.hri.clip_stored(record.entity_ids, to_time(record.end_ns))
        except Exception as error:  # noqa: BLE001 - at shutdown the context may be gone; the clip is stored
            self.get_logger().warning(f"clip {record.clip_index} stored but not published: {error}")
        self.get_logger().info(
            f"stored clip {record.clip_index}: {len(record.episodic)} episodic, {len(record.semantic)} semantic"
        )

    def _on_progress(self, msg: ClockMsg) -> None:
        self.closer.clock("progress", to_ns(msg.clock), time.monotonic_ns())

    def _on_tick(self) -> None:
        """Close the open window on the stream clock, or when the stream stopped (ClipCloser says when)."""
        wall, now = time.monotonic_ns(), self.get_clock().now().nanoseconds
        sim = bool(self.get_parameter("use_sim_time").value)
        if sim:
            self.closer.clock("sim", now, wall)
        with self._ingest_lock:
            closed, idle = self.closer.on_clock(None if sim else now), self.closer.on_idle(wall)
            if idle:
                self.get_logger().info(f"clip {idle[0].clip_index} closes: nothing came for clip_idle_close_s")
            self._store(closed + idle)

    def flush(self) -> None:
        """Store the open clip and wait for the backlog (up to memorize_drain_s): a caller that knows
        the stream ended, or shutdown."""
        with self._ingest_lock:
            self._store(self.windows.flush(), everything=True)
        if self.ingester is not None:
            self.ingester.wait_idle(self.drain_s)

    def release(self) -> None:
        """Store the open clip, let the worker finish (up to memorize_drain_s) and close the store."""
        try:
            with self._ingest_lock:
                if self.windows is not None:
                    self._store(self.windows.flush(), everything=True)
            if self.ingester is not None:
                self.ingester.close(self.drain_s)
        finally:
            self.ingester = None
            if self.hri is not None:
                self.hri.close()
                self.hri = None
            if self.memory is not None:
                self.memory.close()
            self.memory = None
            self.store_error = "memory store closed (memory node not configured)"


def main(args: list[str] | None = None) -> None:
    raise SystemExit(run_node(MemoryNode, NODE_NAME, args))  # shutdown flushes the open clip, closes the store


if __name__ == "__main__":
    main()
