"""memory_node in its own process, driven over real DDS: evidence in, clips out, services, concurrency, flush."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from dds_helpers import call, spin_until
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from m3_interfaces.msg import AudioChunk, ClipMemory, EntityMatch, FaceObservation, FaceTracks, VoiceSegment
from m3_interfaces.srv import GetEntity, GetStats, SearchClip, SearchNode
from m3_memory.store.sqlite_store import DB_FILE

HERE = Path(__file__).parent
FACTS = [
    ("I like green tea", "<voice_1> likes green tea."),
    ("I put the keys in the drawer", "<voice_1> put the keys in the drawer."),
    ("I work at the bakery on main street", "<voice_2> works at the bakery on main street."),
    ("I usually drive a red bicycle", "<voice_2> usually drives a red bicycle."),
]
QUERIES = [
    ["what does the person like to drink", FACTS[0][1]],
    ["where are the keys", FACTS[1][1]],
    ["who works at a bakery", FACTS[2][1]],
    ["what vehicle does someone use", FACTS[3][1]],
]


def stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


@pytest.fixture(scope="module")
def faces():
    """Real dlib face embeddings of two real photographs (m3_perception's encoder)."""
    from matplotlib import cbook
    from PIL import Image
    from skimage import data

    from m3_perception.faces.face_encoder import FaceEncoder

    encoder = FaceEncoder()
    astronaut = data.astronaut()
    hopper = np.asarray(Image.open(cbook.get_sample_data("grace_hopper.jpg")).convert("RGB"))
    return {
        "astronaut": astronaut,
        "astronaut_emb": list(encoder.encode(astronaut)[0].embedding),
        "hopper_emb": list(encoder.encode(hopper)[0].embedding),
    }


@pytest.fixture(scope="module")
def system(tmp_path_factory, faces):
    memory_dir = tmp_path_factory.mktemp("dds") / "memory"
    node_proc = subprocess.Popen(
        [sys.executable, "-m", "m3_memory.memory_node", "--ros-args", "-p", f"memory_dir:={memory_dir}",
         "-p", "clip_seconds:=10.0", "-p", "clip_close_delay:=5.0", "-p", "max_image_pixels:=1000000",
         "-p", "clip_idle_close_s:=3600.0"],  # clip 2 stays open across the service tests (the shutdown test)
    )  # fmt: skip
    rclpy.init()
    client = Node("memory_dds_test")
    clips: list[ClipMemory] = []
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    client.create_subscription(ClipMemory, "/m3/memory/clips", clips.append, latched)
    pubs = {
        "faces": client.create_publisher(FaceTracks, "/m3/faces", 100),
        "voices": client.create_publisher(VoiceSegment, "/m3/voices", 100),
        "matches": client.create_publisher(EntityMatch, "/m3/entity_matches", 100),
    }

    def subscribed() -> bool:
        assert node_proc.poll() is None, "memory_node exited during start-up"
        return all(p.get_subscription_count() > 0 for p in pubs.values())

    spin_until(client, subscribed, 90)
    yield {"node": client, "proc": node_proc, "clips": clips, "pubs": pubs, "dir": memory_dir}
    client.destroy_node()
    rclpy.try_shutdown()
    if node_proc.poll() is None:
        node_proc.kill()
        node_proc.wait()


def publish_face(system, t: float, face_id: str, embedding) -> None:
    msg = FaceTracks(image_width=512, image_height=512)
    msg.header.stamp = stamp(t)
    observation = FaceObservation(face_id=face_id, track_id=1, width=90.0, height=90.0, score=0.95, quality=0.8)
    observation.embedding, observation.embedding_model, observation.crop_jpeg = (
        embedding,
        "dlib_resnet_v1",
        b"\xff\xd8crop",
    )
    msg.faces = [observation]
    system["pubs"]["faces"].publish(msg)


def publish_voice(system, t0: float, t1: float, voice_id: str, text: str) -> None:
    msg = VoiceSegment(segment_id=int(t0), voice_id=voice_id, start=stamp(t0), end=stamp(t1), transcript=text,
                       asr_confidence=0.9, language="en", embedding=[0.6, 0.8], embedding_model="test")  # fmt: skip
    msg.header.stamp = stamp(t1)
    system["pubs"]["voices"].publish(msg)


def wait_heard(system, lines: list[str], timeout_s: float = 60.0) -> None:
    """Until the node has heard every line (search_clip's heard clips hold them word for word): DDS keeps
    no order between the voice and face topics, so a face stamped past a clip's end must not overtake them."""
    request = SearchClip.Request(query=lines[-1], top_k=10, threshold=-1.0)

    def heard_all() -> bool:
        response = call(system["node"], SearchClip, "/m3/memory/search_clip", request)
        heard = " ".join(m.text for c in response.clips if c.heard for m in c.episodic)
        return all(line in heard for line in lines)

    spin_until(system["node"], heard_all, timeout_s)


@pytest.fixture(scope="module")
def stored(system, faces) -> list[ClipMemory]:
    """Clips 0 and 1 stored and published, clip 2 open: the memory every later test reads, made once by
    whichever test asks first (so any one test, or any -k selection, runs alone)."""
    # clip 0: the astronaut speaks (face_1 + voice_1, matched); clip 1: Grace Hopper speaks
    publish_face(system, 100.0, "face_1", faces["astronaut_emb"])
    publish_voice(system, 101.0, 103.0, "voice_1", "hi, I'm Alice. " + FACTS[0][0])
    publish_voice(system, 104.0, 106.0, "voice_1", FACTS[1][0])
    match = EntityMatch(id1="face_1", id1_type=EntityMatch.FACE, id2="voice_1", id2_type=EntityMatch.VOICE,
                        confidence=0.9, evidence_count=2)  # fmt: skip
    match.header.stamp = stamp(106.5)
    system["pubs"]["matches"].publish(match)
    wait_heard(system, [FACTS[0][0], FACTS[1][0]])
    time.sleep(0.5)  # the match (no service shows it before the clip closes) had as long again
    publish_face(system, 116.0, "face_2", faces["hopper_emb"])  # past 110 + 5 s close delay: clip 0 closes
    spin_until(system["node"], lambda: len(system["clips"]) >= 1, 60)
    publish_voice(system, 117.0, 119.0, "voice_2", FACTS[2][0] + ". " + FACTS[3][0])
    wait_heard(system, [FACTS[2][0]])  # in before the next window opens
    publish_face(system, 126.0, "face_2", faces["hopper_emb"])  # clip 2 [120, 130): clip 1 closes
    spin_until(system["node"], lambda: len(system["clips"]) >= 2, 60)
    return system["clips"][:2]


def test_evidence_becomes_published_clips(stored):
    first, second = stored
    assert (first.clip_index, second.clip_index) == (0, 1)
    assert (first.start.sec, first.end.sec) == (100, 110)
    texts = [m.text for m in first.episodic + first.semantic]
    assert "<face_1> is seen." in texts and "Equivalence: <face_1>, <voice_1>" in texts
    assert FACTS[0][1] in texts and FACTS[1][1] in texts
    assert {FACTS[2][1], FACTS[3][1]} <= {m.text for m in second.semantic}


def test_services_answer_from_another_process(system, stored):
    node = system["node"]
    response = call(node, SearchClip, "/m3/memory/search_clip", SearchClip.Request(query="where are the keys?"))
    assert response.error_code == SearchClip.Response.OK
    assert [c.clip_index for c in response.clips] == [0]
    assert "Alice put the keys in the drawer." in [m.text for m in response.clips[0].semantic]
    items = [*response.clips[0].episodic, *response.clips[0].semantic]
    carried = {i: n for m in items for i, n in zip(m.entity_ids, m.entity_names, strict=True)}
    assert carried and set(carried.values()) == {"Alice"}  # every id of the clip is Alice's, named in the results
    response = call(node, GetEntity, "/m3/memory/get_entity", GetEntity.Request(entity_id="person_2"))
    assert response.error_code == GetEntity.Response.OK
    assert (response.entity.entity_id, response.entity.name) == ("person_1", "Alice")
    assert list(response.entity.member_ids) == ["face_1", "voice_1"]
    assert bytes(response.entity.crop_jpeg) == b"\xff\xd8crop"
    stats = call(node, GetStats, "/m3/memory/get_stats", GetStats.Request())
    assert (stats.error_code, stats.clips, stats.faces, stats.voices, stats.persons) == (0, 2, 2, 2, 3)
    assert stats.memory_dir == str(system["dir"])


def test_search_node_by_face_image(system, faces, stored):
    """A real photo as the query: the node embeds it with m3_perception and finds the stored face."""
    mirrored = np.ascontiguousarray(faces["astronaut"][:, ::-1])
    request = SearchNode.Request(top_k=2)
    request.image.height, request.image.width = mirrored.shape[:2]
    request.image.encoding, request.image.step = "rgb8", mirrored.shape[1] * 3
    request.image.data = mirrored.tobytes()
    response = call(system["node"], SearchNode, "/m3/memory/search_node", request)
    assert response.error_code == SearchNode.Response.OK, response.error_message
    assert response.items[0].node_id == "face_1" and response.items[0].score > 0.95
    assert response.items[1].node_id == "face_2" and response.items[1].score < 0.93


@pytest.mark.parametrize(
    ("request_fields", "code"),
    [
        ({}, SearchNode.Response.EMPTY_QUERY),
        ({"query": "x" * 1001}, SearchNode.Response.QUERY_TOO_LONG),
        ({"query": "tea", "top_k": 0}, SearchNode.Response.INVALID_ARGUMENT),
        ({"query": "tea", "kinds": ["dream"]}, SearchNode.Response.INVALID_ARGUMENT),
        ({"query": "tea", "before_clip": -5}, SearchNode.Response.INVALID_ARGUMENT),
        ({"query": "tea", "before_stamp": Time(sec=0, nanosec=1_000_000_000)}, SearchNode.Response.INVALID_ARGUMENT),
        ({"query": "tea", "before_stamp": Time(sec=-1, nanosec=2_000_000_000)}, SearchNode.Response.INVALID_ARGUMENT),
        ({"query": "tea", "robot_id": "robot_b"}, SearchNode.Response.INVALID_ARGUMENT),  # sqlite: no fleet
        ({"query": "tea", "robot_id": "no spaces"}, SearchNode.Response.INVALID_ARGUMENT),
        ({"image_bytes": b"\x00" * 10}, SearchNode.Response.INVALID_IMAGE),
        ({"audio_format": "S24LE"}, SearchNode.Response.INVALID_AUDIO),
    ],
)
def test_search_node_error_codes_over_dds(system, request_fields, code):
    request = SearchNode.Request()
    for key, value in request_fields.items():
        if key == "image_bytes":
            request.image.height, request.image.width, request.image.step = 2, 2, 6
            request.image.encoding, request.image.data = "rgb8", value
        elif key == "audio_format":
            request.audio = AudioChunk(sample_format=value, data=b"\x00" * 3200)
        else:
            setattr(request, key, value)
    response = call(system["node"], SearchNode, "/m3/memory/search_node", request)
    assert response.error_code == code, response.error_message
    assert response.error_message and not response.items


def test_other_service_error_codes_over_dds(system):
    node = system["node"]
    assert call(node, SearchClip, "/m3/memory/search_clip", SearchClip.Request(query="")).error_code == 1
    assert call(node, SearchClip, "/m3/memory/search_clip", SearchClip.Request(query="a", top_k=0)).error_code == 3
    for stamp in (Time(sec=3, nanosec=1_000_000_000), Time(sec=-2, nanosec=2_500_000_000), Time(sec=-1)):
        response = call(node, SearchClip, "/m3/memory/search_clip", SearchClip.Request(query="a", before_stamp=stamp))
        assert response.error_code == SearchClip.Response.INVALID_ARGUMENT and "before_stamp" in response.error_message
    response = call(node, GetEntity, "/m3/memory/get_entity", GetEntity.Request(entity_id="face_404"))
    assert response.error_code == GetEntity.Response.UNKNOWN_ENTITY


def test_sqlite_memory_has_no_fleet_over_dds(system, stored):
    """SQLite: '' and the node's own robot_id answer as ever; another robot's id is INVALID_ARGUMENT."""
    node = system["node"]
    for robot_id in ("", "robot"):  # the node's default robot_id
        response = call(node, SearchClip, "/m3/memory/search_clip",
                        SearchClip.Request(query="green tea", threshold=0.2, robot_id=robot_id))  # fmt: skip
        assert response.error_code == SearchClip.Response.OK and response.clips, response.error_message
        assert {c.robot_id for c in response.clips} == {"robot"}
        assert {m.robot_id for c in response.clips for m in c.episodic + c.semantic} == {"robot"}
    response = call(node, SearchClip, "/m3/memory/search_clip", SearchClip.Request(query="tea", robot_id="robot_b"))
    assert response.error_code == SearchClip.Response.INVALID_ARGUMENT and not response.clips
    assert "no fleet: memory_backend is sqlite" in response.error_message


def test_concurrent_search_node_from_several_processes(system, stored):
    env = dict(os.environ, PYTHONPATH=f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "dds_search_client.py"), str(i), "60", json.dumps(QUERIES)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    results = [json.loads(p.communicate(timeout=180)[0].strip().splitlines()[-1]) for p in procs]
    assert sum(r["answered"] for r in results) == 240
    assert [w for r in results for w in r["wrong"]] == []


def test_huge_queries_are_refused_and_the_node_keeps_serving(system, stored):
    """Issue 13: a valid 27000x27000 mono8 query crashed the node (here the limit is 1 MP: 1001x1000 is
    over it); 999 999 937 Hz audio made the resampler raise MemoryError (INTERNAL_ERROR)."""
    node = system["node"]
    request = SearchNode.Request()
    request.image.height, request.image.width, request.image.step = 1000, 1001, 1001
    request.image.encoding, request.image.data = "mono8", bytes(1001 * 1000)
    response = call(node, SearchNode, "/m3/memory/search_node", request)
    assert response.error_code == SearchNode.Response.INVALID_IMAGE
    assert "1001x1000 = 1001000 pixels is over the limit of 1000000 (max_image_pixels)" in response.error_message
    request = SearchNode.Request(audio=AudioChunk(sample_rate=999_999_937, data=bytes(65536)))
    response = call(node, SearchNode, "/m3/memory/search_node", request)
    assert response.error_code == SearchNode.Response.INVALID_AUDIO, response.error_message
    assert "sample_rate 999999937 Hz is outside the accepted 8000..192000 Hz" in response.error_message
    response = call(node, SearchClip, "/m3/memory/search_clip", SearchClip.Request(query="where are the keys?"))
    assert response.error_code == SearchClip.Response.OK and system["proc"].poll() is None


@pytest.fixture(scope="module")
def bad_stamps(system, faces, stored) -> None:
    """Issue 13's evidence: one utterance stamped near INT32_MAX made the node open clip 71 582 754 and file
    the following evidence into it; stamps going backwards stored an utterance ending before it starts.
    Then the stream goes on in clip 2 (the shutdown test reads what was stored)."""
    publish_voice(system, 2_147_483_640.0, 2_147_483_650.0, "voice_1", "sent from far in the future")
    publish_face(system, 1_000_000.0, "face_2", faces["hopper_emb"])
    publish_voice(system, 128.0, 127.0, "voice_2", "said backwards in time")
    publish_face(system, 128.5, "face_1", faces["astronaut_emb"])  # the stream goes on
    time.sleep(1.0)


def test_evidence_with_bad_stamps_is_dropped(system, bad_stamps):
    assert system["proc"].poll() is None


def test_shutdown_flushes_the_open_clip(system, bad_stamps):
    proc = system["proc"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    conn = sqlite3.connect(system["dir"] / DB_FILE)
    indexes = [row[0] for row in conn.execute("SELECT clip_index FROM clips ORDER BY clip_index")]
    texts = [row[0] for row in conn.execute("SELECT text FROM text_nodes WHERE clip_index = 2")]
    backwards = conn.execute("SELECT count(*) FROM text_nodes WHERE end_ns < start_ns").fetchone()[0]
    conn.close()
    assert indexes == [0, 1, 2]  # clip 2 (faces at t=126 and 128.5) was still open
    assert "<face_1> is seen." in texts and backwards == 0
    assert not [t for t in texts if "future" in t or "backwards" in t], texts
