"""Two memory_node processes (robot_a, robot_b: each in its own namespace, /robot_a and /robot_b,
where its topics and services are) sharing one milvus-lite server process, driven over real DDS: a
face robot a stored and named is the identity robot b's perception joins; each answers searches from its own memory
(robot_id: its own id) or from the whole fleet's (robot_id "", the default)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import rclpy
from builtin_interfaces.msg import Time
from dds_helpers import call, spin_until
from m3mem_evidence import unit
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from m3_interfaces.msg import ClipMemory, EntityMatch, FaceObservation, FaceTracks, VoiceSegment
from m3_interfaces.srv import GetEntity, SearchClip, SearchNode
from m3_memory.milvus.server import MilvusLiteServer


def stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


def memory_node(robot: str, slot: int, uri: str, spool: str) -> subprocess.Popen:
    params = {"memory_backend": "milvus", "milvus_uri": uri, "milvus_collection_prefix": "fleet_dds",
              "robot_id": robot, "fleet_slot": slot, "milvus_spool_dir": spool, "clip_seconds": 10.0,
              "clip_close_delay": 2.0}  # fmt: skip
    args = [arg for name, value in params.items() for arg in ("-p", f"{name}:={value}")]
    namespace = ["-r", f"__ns:=/{robot}"]  # a robot's namespace: its topics and services under /<robot>/m3/...
    return subprocess.Popen([sys.executable, "-m", "m3_memory.memory_node", "--ros-args", *args, *namespace])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleet_dds")
    server = MilvusLiteServer(str(base / "milvus")).start()
    procs = {
        robot: memory_node(robot, slot, server.uri, str(base / robot))
        for robot, slot in (("robot_a", 1), ("robot_b", 2))
    }
    rclpy.init()
    node = Node("memory_fleet_dds_test")
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    clips: dict[str, list[ClipMemory]] = {robot: [] for robot in procs}
    pubs = {}
    for robot in procs:
        node.create_subscription(ClipMemory, f"/{robot}/m3/memory/clips", clips[robot].append, latched)
        pubs[robot] = (node.create_publisher(FaceTracks, f"/{robot}/m3/faces", 100),
                       node.create_publisher(VoiceSegment, f"/{robot}/m3/voices", 100),
                       node.create_publisher(EntityMatch, f"/{robot}/m3/entity_matches", 100))  # fmt: skip

    def ready() -> bool:
        assert all(p.poll() is None for p in procs.values()), "a memory_node exited during start-up"
        return all(pub.get_subscription_count() > 0 for pair in pubs.values() for pub in pair)

    spin_until(node, ready, 120)
    yield {"node": node, "clips": clips, "pubs": pubs}
    node.destroy_node()
    rclpy.try_shutdown()
    for proc in procs.values():
        proc.terminate()
    for proc in procs.values():
        proc.wait(timeout=60)
    server.stop()


def send(fleet, robot: str, t: float, face_id: str, seed: int, utterance: str = "") -> None:
    faces, voices, matches = fleet["pubs"][robot]
    msg = FaceTracks(image_width=512, image_height=512)
    msg.header.stamp = stamp(t)
    observation = FaceObservation(face_id=face_id, track_id=1, width=90.0, height=90.0, score=0.95, quality=0.8)
    observation.embedding, observation.embedding_model = unit(seed, 128), "test"
    msg.faces = [observation]
    faces.publish(msg)
    if utterance:
        voice = VoiceSegment(segment_id=int(t), voice_id="voice_1", start=stamp(t + 1), end=stamp(t + 2),
                             transcript=utterance, asr_confidence=0.9, language="en", embedding=unit(900 + seed, 256),
                             embedding_model="test")  # fmt: skip
        voice.header.stamp = stamp(t + 2)
        voices.publish(voice)
        match = EntityMatch(id1=face_id, id1_type=EntityMatch.FACE, id2="voice_1", id2_type=EntityMatch.VOICE,
                            confidence=0.9, evidence_count=2)  # fmt: skip
        match.header.stamp = stamp(t + 2.5)
        matches.publish(match)


@pytest.fixture(scope="module")
def stored(fleet):
    """Robot a meets Alice, who likes green tea; then robot b sees her put the keys in the drawer."""
    node, clips = fleet["node"], fleet["clips"]
    send(fleet, "robot_a", 100.0, "face_1", 1, "hi, my name is Alice. I like green tea")
    time.sleep(0.5)
    send(fleet, "robot_a", 115.0, "face_2", 2)  # past 110 + 2 s: robot a's clip 0 closes
    spin_until(node, lambda: len(clips["robot_a"]) >= 1, 90)
    assert "face_1001" in clips["robot_a"][0].entity_ids  # robot a's ids: n * 1000 + slot 1
    # robot b's perception sees the same face under its own id face_1, and mentions the keys
    send(fleet, "robot_b", 200.0, "face_1", 1, "I put the keys in the drawer")
    time.sleep(0.5)
    send(fleet, "robot_b", 215.0, "face_3", 3)
    spin_until(node, lambda: len(clips["robot_b"]) >= 1, 90)
    return fleet


def test_two_memory_nodes_share_people_through_one_milvus(stored):
    node, clips = stored["node"], stored["clips"]
    assert "face_1001" in clips["robot_b"][0].entity_ids  # joined robot a's identity
    entity = call(node, GetEntity, "/robot_b/m3/memory/get_entity", GetEntity.Request(entity_id="face_1001"))
    assert entity.error_code == GetEntity.Response.OK and entity.entity.name == "Alice"
    # each node answers from its own memory: the keys are robot b's, the tea robot a's
    keys = call(node, SearchClip, "/robot_b/m3/memory/search_clip",
                SearchClip.Request(query="where are the keys?", robot_id="robot_b"))  # fmt: skip
    assert any("drawer" in m.text for c in keys.clips for m in c.episodic + c.semantic)
    tea = call(node, SearchClip, "/robot_a/m3/memory/search_clip",
               SearchClip.Request(query="what does Alice drink?", robot_id="robot_a"))  # fmt: skip
    assert any("green tea" in m.text for c in tea.clips for m in c.episodic + c.semantic)


def search_clip(node, robot: str, query: str, robot_id: str) -> SearchClip.Response:
    request = SearchClip.Request(query=query, top_k=5, threshold=0.3, robot_id=robot_id)
    return call(node, SearchClip, f"/{robot}/m3/memory/search_clip", request)


def test_search_services_cover_the_fleet_or_one_robot(stored):
    """Over DDS: robot a's services with robot_id "" answer from robot b's memory too (robot_id
    "robot_b" in the result, names shared), with robot_id "robot_a" only from its own."""
    node = stored["node"]
    fleet = search_clip(node, "robot_a", "where are the keys?", "")
    assert fleet.error_code == SearchClip.Response.OK, fleet.error_message
    drawer = [(c, m) for c in fleet.clips for m in c.episodic + c.semantic if "drawer" in m.text]
    assert drawer and all(c.robot_id == "robot_b" and m.robot_id == "robot_b" for c, m in drawer)
    assert all(m.node_id.startswith("robot_b/") for _, m in drawer)  # another robot's ids are qualified
    assert any("Alice" in m.text for _, m in drawer)  # robot b's face_1 is robot a's Alice
    own = search_clip(node, "robot_a", "where are the keys?", "robot_a")
    assert own.error_code == SearchClip.Response.OK
    assert not any("drawer" in m.text for c in own.clips for m in c.episodic + c.semantic)
    assert {c.robot_id for c in own.clips} <= {"robot_a"}
    only_b = search_clip(node, "robot_a", "where are the keys?", "robot_b")
    assert only_b.clips and {c.robot_id for c in only_b.clips} == {"robot_b"}
    request = SearchNode.Request(query="keys in the drawer", kinds=["episodic"], top_k=3)
    nodes = call(node, SearchNode, "/robot_a/m3/memory/search_node", request)
    assert nodes.error_code == SearchNode.Response.OK and nodes.items[0].robot_id == "robot_b"
    assert "drawer" in nodes.items[0].text
    request.robot_id = "robot_a"
    nodes = call(node, SearchNode, "/robot_a/m3/memory/search_node", request)
    assert nodes.error_code == SearchNode.Response.OK and {i.robot_id for i in nodes.items} <= {"robot_a"}
    assert not any("drawer" in i.text for i in nodes.items)


def test_an_invalid_robot_id_is_refused_over_dds(stored):
    node = stored["node"]
    for bad in ("fleet", "robot b", 'x" or robot_id != "'):
        response = search_clip(node, "robot_a", "keys", bad)
        assert response.error_code == SearchClip.Response.INVALID_ARGUMENT and "robot_id" in response.error_message
        request = SearchNode.Request(query="keys", robot_id=bad)
        response = call(node, SearchNode, "/robot_a/m3/memory/search_node", request)
        assert response.error_code == SearchNode.Response.INVALID_ARGUMENT and not response.items
    assert search_clip(node, "robot_a", "keys", "robot_a").error_code == SearchClip.Response.OK  # still serving
