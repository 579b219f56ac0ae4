"""What perception saw reaches memory over real DDS (issue 23): a memory_node in its own process takes
ObjectTracks and TextRegions beside a face, stores the clip with what was seen, and its search_node service
finds what the note said; the cup and the note are entities that get_entity, search_node's kind filter and
locate_entity return."""

from __future__ import annotations

import subprocess
import sys

import pytest
import rclpy
from builtin_interfaces.msg import Time
from dds_helpers import call, spin_until
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from m3_interfaces.msg import (
    ClipMemory,
    FaceObservation,
    FaceTracks,
    ObjectTrack,
    ObjectTracks,
    TextRegion,
    TextRegions,
)
from m3_interfaces.srv import GetEntity, GetStats, LocateEntity, SearchNode

CROP = b"\xff\xd8\xff\xe0 the cup \xff\xd9"  # sent once, as perception sends a track's new best crop


def stamp(seconds: float) -> Time:
    return Time(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


@pytest.fixture
def system(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "m3_memory.memory_node", "--ros-args", "-r", "__node:=memory_seen_dds",
         "-p", f"memory_dir:={tmp_path / 'memory'}", "-p", "clip_seconds:=5.0", "-p", "clip_idle_close_s:=1.0"],
    )  # fmt: skip
    rclpy.init()
    node = Node("memory_seen_dds_test")
    clips: list[ClipMemory] = []
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(ClipMemory, "/m3/memory/clips", clips.append, latched)
    pubs = {t: node.create_publisher(m, f"/m3/{t}", 100) for t, m in (("faces", FaceTracks), ("objects", ObjectTracks),
                                                                     ("texts", TextRegions))}  # fmt: skip

    def subscribed() -> bool:
        assert proc.poll() is None, "memory_node exited during start-up"
        return all(p.get_subscription_count() > 0 for p in pubs.values())

    spin_until(node, subscribed, 90)
    yield node, pubs, clips
    node.destroy_node()
    rclpy.try_shutdown()
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_objects_and_text_seen_become_memories_and_are_searched(system):
    node, pubs, clips = system
    for t in (200.0, 200.5, 201.0):
        faces = FaceTracks(image_width=640, image_height=480)
        faces.header.stamp = stamp(t)
        faces.faces = [FaceObservation(face_id="face_1", track_id=1, width=90.0, height=90.0, score=0.9,
                                       embedding=[0.6, 0.8], embedding_model="test")]  # fmt: skip
        pubs["faces"].publish(faces)
        objects = ObjectTracks(image_width=640, image_height=480)
        objects.header.stamp = stamp(t)
        objects.objects = [
            ObjectTrack(
                object_id="object_1",
                label="cup",
                confidence=0.7,
                x=10.0,
                y=20.0,
                width=50.0,
                height=60.0,
                crop_jpeg=list(CROP) if t == 200.5 else [],
            ),
            ObjectTrack(object_id="object_2", label="person", confidence=0.9, x=0.0, y=0.0, width=200.0, height=400.0),
        ]
        pubs["objects"].publish(objects)
    texts = TextRegions(image_width=640, image_height=480)
    texts.header.stamp = stamp(200.5)
    texts.regions = [TextRegion(region_id="text_1", text="Dentist on Tuesday at 3 pm", confidence=0.98, is_new=True)]
    pubs["texts"].publish(texts)
    spin_until(node, lambda: len(clips) >= 1, 60)  # closed when the stream has been idle for 1 s
    episodic = [m.text for m in clips[0].episodic]
    assert "<face_1> holds a cup." in episodic, episodic  # the cup lies in the person box under face_1
    assert 'A written note or sign says: "Dentist on Tuesday at 3 pm"' in episodic, episodic
    assert not any("person is seen" in text for text in episodic)  # people are the faces' business
    response = call(
        node, SearchNode, "/m3/memory/search_node", SearchNode.Request(query="when is the dentist?", top_k=1)
    )
    assert response.error_code == SearchNode.Response.OK, response.error_message
    assert [i.text for i in response.items] == ['A written note or sign says: "Dentist on Tuesday at 3 pm"']
    cup = next(i for i in clips[0].episodic if i.text == "<face_1> holds a cup.")
    thing = next(e for e in cup.entity_ids if e.startswith("object_"))
    entity = call(node, GetEntity, "/m3/memory/get_entity", GetEntity.Request(entity_id=thing))
    assert entity.error_code == GetEntity.Response.OK, entity.error_message
    e = entity.entity
    assert (e.kind, e.label, e.name, list(e.member_ids), bytes(e.crop_jpeg)) == ("object", "cup", "", [], CROP)
    assert (
        cup.node_id in e.memory_ids and e.observation_count == 3 and e.first_clip == e.last_clip == clips[0].clip_index
    )
    by_kind = call(node, SearchNode, "/m3/memory/search_node",
                   SearchNode.Request(query="where is my cup?", kinds=["object", "text"], top_k=5))  # fmt: skip
    assert [(i.node_id, i.kind) for i in by_kind.items] == [(thing, "object")], by_kind.error_message
    located = call(node, LocateEntity, "/m3/memory/locate_entity", LocateEntity.Request(entity_id=thing))
    assert located.error_code == LocateEntity.Response.OK, located.error_message
    assert [(s.how, s.clip_index) for s in located.sightings] == [("seen", clips[0].clip_index)]
    assert (located.sightings[0].last.sec, located.sightings[0].last.nanosec) == (201, 0)
    by_class = call(node, LocateEntity, "/m3/memory/locate_entity", LocateEntity.Request(label=" Cup "))
    assert (by_class.error_code, by_class.entity_id) == (LocateEntity.Response.OK, thing), by_class.error_message
    unseen = call(node, LocateEntity, "/m3/memory/locate_entity", LocateEntity.Request(label="giraffe"))
    assert unseen.error_code == LocateEntity.Response.UNKNOWN_ENTITY and "giraffe" in unseen.error_message
    stats = call(node, GetStats, "/m3/memory/get_stats", GetStats.Request())
    assert (stats.error_code, stats.objects, stats.texts, stats.faces) == (GetStats.Response.OK, 1, 1, 1)
