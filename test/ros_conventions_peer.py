"""The far side of test_ros_conventions_dds.py, run in a process with the fixture interfaces on its path
(ros_conventions_env.fixture_env): an audio_common driver and a camera feeding the nodes, and a REP-155
consumer recording /humans/... and the nodes' own /m3/... outputs. Writes what it saw as JSON.

    python ros_conventions_peer.py OUT.json
"""

from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np
import rclpy
from audio_common_msgs.msg import AudioData, AudioDataStamped, AudioInfo
from builtin_interfaces.msg import Time
from hri_msgs.msg import IdsList, IdsMatch
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import Header, String

from m3_interfaces.msg import EntityMatch, FaceTracks, VoiceSegment
from m3_perception.material.real_speech import librivox_clips
from m3_perception.material.synthetic import compose, face_photos, speak
from m3_runtime.audio_codec import encode_s16le, resample
from m3_runtime.image_codec import encode_jpeg
from m3_runtime.node_shutdown import spinning

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
BOB_LINE = "my name is bob and i like green tea"
RATE, CHANNELS = 48000, 2  # the driver's format: not the node's 16 kHz mono, so AudioInfo must be honoured
CHUNK_S = 0.1
# (start, end, face placements, speech start) in stream seconds from T0.
SCENES = [(0.0, 6.0, [("hopper", 150, 80, 0.8)], 0.5), (6.0, 13.0, [("astronaut", 200, 100, 1.0)], 6.5)]
END_S = 16.0  # 13..16: nobody in view, silence


def stamp(t: float) -> Time:
    return Time(sec=int(t), nanosec=round((t - int(t)) * 1e9) % 1_000_000_000)


def sec(t: Time) -> float:
    return t.sec + t.nanosec * 1e-9


class Peer(Node):
    def __init__(self) -> None:
        super().__init__("ros_conventions_peer")
        self.seen: dict[str, list] = {k: [] for k in ("faces_tracked", "voices_tracked", "candidate_matches")}
        self.seen.update({k: [] for k in ("persons_tracked", "persons_known", "m3_faces", "m3_voices", "m3_matches")})
        self.pub_image = self.create_publisher(CompressedImage, "/camera/image_raw/compressed", 50)
        self.pub_audio = self.create_publisher(AudioDataStamped, "/audio/audio_stamped", 500)
        self.pub_info = self.create_publisher(AudioInfo, "/audio/audio_info", LATCHED)
        for topic, key in (
            ("/humans/faces/tracked", "faces_tracked"),
            ("/humans/voices/tracked", "voices_tracked"),
            ("/humans/persons/tracked", "persons_tracked"),
            ("/humans/persons/known", "persons_known"),
        ):
            self.create_subscription(IdsList, topic, lambda m, k=key: self.seen[k].append(list(m.ids)), LATCHED)
        self.create_subscription(IdsMatch, "/humans/candidate_matches", self._on_candidate, 100)
        self.create_subscription(FaceTracks, "/m3/faces", self._on_faces, 100)
        self.create_subscription(VoiceSegment, "/m3/voices", self._on_voice, 100)
        self.create_subscription(EntityMatch, "/m3/entity_matches", self._on_match, 100)

    def _on_candidate(self, m: IdsMatch) -> None:
        self.seen["candidate_matches"].append([m.id1, m.id1_type, m.id2, m.id2_type, m.confidence])

    def _on_faces(self, m: FaceTracks) -> None:
        self.seen["m3_faces"].append([sec(m.header.stamp), [f.face_id for f in m.faces]])

    def _on_voice(self, m: VoiceSegment) -> None:
        self.seen["m3_voices"].append([sec(m.start), m.voice_id, m.transcript])

    def _on_match(self, m: EntityMatch) -> None:
        self.seen["m3_matches"].append([m.id1, m.id2])

    def audio(self, t: float, samples: np.ndarray) -> None:
        stereo = np.repeat(samples.astype(np.float32), CHANNELS)  # interleaved L R L R
        self.pub_audio.publish(
            AudioDataStamped(header=Header(stamp=stamp(t), frame_id="mic"), audio=AudioData(data=encode_s16le(stereo)))
        )

    def info(self, coding_format: str) -> None:
        info = AudioInfo(channels=CHANNELS, sample_rate=RATE, sample_format="S16LE", coding_format=coding_format)
        self.pub_info.publish(info)


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not pred():
        time.sleep(0.2)
    return pred()


def late_person_values(person_ids: list[str]) -> dict[str, dict[str, str]]:
    """What a subscriber that joins now gets on each person's latched topics."""
    late = Node("ros_conventions_late")
    got: dict[str, dict[str, str]] = {p: {} for p in person_ids}
    for p in person_ids:
        for field in ("name", "face_id", "voice_id", "alias"):
            late.create_subscription(
                String, f"/humans/persons/{p}/{field}", lambda m, p=p, f=field: got[p].__setitem__(f, m.data), LATCHED
            )
    with spinning(late):  # an executor of its own: stopped before the node is destroyed
        time.sleep(3.0)
    return got


def main() -> None:
    out = sys.argv[1]
    rclpy.init()
    peer = Peer()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(peer)
    threading.Thread(target=executor.spin, daemon=True).start()
    result: dict = {"ok": False}
    try:
        ready = wait_for(
            lambda: (
                peer.pub_audio.get_subscription_count() > 0
                and peer.pub_image.get_subscription_count() > 0
                and peer.count_publishers("/humans/faces/tracked") > 0
                and peer.count_publishers("/humans/persons/known") > 0
            ),
            240.0,
        )
        if not ready:
            raise SystemExit("the nodes did not come up (no subscriber to the driver's topics, no /humans publishers)")
        t0 = float(int(time.time()))
        silence = np.zeros(int(RATE * CHUNK_S), np.float32)
        for k in range(3):  # before any AudioInfo: dropped
            peer.audio(t0 - 3.0 + k * CHUNK_S, silence)
        time.sleep(1.0)
        peer.info("mp3")  # a format the node cannot decode: said once, its data dropped
        time.sleep(0.5)
        peer.audio(t0 - 2.0, silence)
        time.sleep(0.5)
        peer.info("wave")
        time.sleep(1.0)

        reference = librivox_clips()[0]
        lines = [resample(speak(BOB_LINE, "kal"), 16000, RATE), resample(reference.samples, 16000, RATE)]
        track = np.zeros(int(END_S * RATE), np.float32)
        for (_, _, _, at), x in zip(SCENES, lines, strict=True):
            track[int(at * RATE) : int(at * RATE) + len(x)] = x
        photos = face_photos()
        frames = [encode_jpeg(compose(photos, placements), 90) for _, _, placements, _ in SCENES]
        empty = encode_jpeg(compose(photos, []), 90)
        step = int(RATE * CHUNK_S)
        start = time.monotonic()
        for i in range(0, len(track), step):
            t = i / RATE
            if i % (step * 5) == 0:  # 2 frames per second
                jpeg = next((f for (a, b, _, _), f in zip(SCENES, frames, strict=True) if a <= t < b), empty)
                image = CompressedImage(header=Header(stamp=stamp(t0 + t), frame_id="cam"), format="jpeg")
                image.data = jpeg
                peer.pub_image.publish(image)
            peer.audio(t0 + t, track[i : i + step])
            time.sleep(max(0.0, start + t + CHUNK_S - time.monotonic()))  # real time: the memory's clock
        if not wait_for(lambda: len(peer.seen["m3_voices"]) >= 2, 180.0):
            raise SystemExit(f"perception produced {peer.seen['m3_voices']} from the audio_common stream")
        # Persons: a new late subscriber each try, until one person has a name, a face and a voice.
        late: dict[str, dict[str, str]] = {}
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            known = peer.seen["persons_known"][-1] if peer.seen["persons_known"] else []
            last = max((int(p.split("_")[1]) for p in known), default=0)
            late = late_person_values([f"person_{k}" for k in range(1, last + 1)])  # merged ones too
            if any(len(v) == 3 and v.get("name") for v in late.values()):
                break
        result.update(peer.seen, t0=t0, reference=reference.text, bob=BOB_LINE, late=late, ok=True)
    finally:
        with open(out, "w") as handle:
            json.dump(result, handle)
        executor.shutdown()
        peer.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
