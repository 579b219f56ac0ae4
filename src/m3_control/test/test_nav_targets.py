"""A navigate_to step's pose comes from the regions file, from where a person was last observed, or from where
the robot was when a remembered event happened; never from a place merely named in memory text."""

from __future__ import annotations

from m3_control.memory_client import Memory
from m3_control.nav_targets import person_target, target_pose
from m3_memory.graph.records import Place
from m3_memory.place.regions import Region, Regions

S = 1_000_000_000
REGIONS = Regions(
    [
        Region("kitchen", "map", polygon=((0.0, 0.0), (4.0, 0.0), (4.0, 2.0), (0.0, 2.0))),
        Region("front door", "map", center=(9.0, 1.0), radius=0.5),
    ]
)


def said(node_id: str, text: str, end_s: float, place: Place | None) -> Memory:
    return Memory(node_id=node_id, kind="episodic", text=text, end_ns=int(end_s * S), place=place)


EVIDENCE = [
    said("episodic_1", 'Carol says: "I left my phone on the sofa"', 100, Place("map", 5.0, 6.0, 1.0, "living room")),
    said("episodic_2", 'Carol says: "my phone is charging by the bed now"', 300, Place("map", 12.0, 3.0, 0.5, "")),
    said("episodic_3", 'Bob says: "the garage is full of boxes"', 200, Place("map", 2.0, 1.0, 0.0, "kitchen")),
    said("episodic_4", 'Ana says: "the phone bill came"', 400, None),  # no pose: never a target
]


def located(name: str):
    people = {"Bob": ("person_2", Place("map", 7.0, 7.0, 3.0, ""), 250 * S), "Ana": ("person_3", None, 90 * S)}
    if name not in people:
        raise LookupError(name)
    return people[name]


def test_a_named_region_gives_its_centre_whatever_memory_says():
    pose = target_pose("the Kitchen", EVIDENCE, REGIONS, located)
    assert (pose.frame_id, pose.x, pose.y, pose.stamp_ns, pose.evidence_id) == ("map", 2.0, 1.0, 0, "")
    assert "region 'kitchen'" in pose.source
    door = target_pose("front door", [], REGIONS)
    assert (door.x, door.y) == (9.0, 1.0)


def test_a_person_gives_where_they_were_last_observed():
    pose = target_pose("Bob", EVIDENCE, REGIONS, located)
    assert (pose.x, pose.y, pose.yaw, pose.stamp_ns, pose.evidence_id) == (7.0, 7.0, 3.0, 250 * S, "person_2")
    assert person_target("Ana", located) is None  # heard where no pose was recorded
    assert person_target("<person_2>", lambda _: located("Bob")).evidence_id == "person_2"
    assert person_target("Bob's old bike", located) is None  # a thing of Bob's, not Bob
    assert person_target("Zed", located) is None


def test_an_event_gives_where_the_robot_was_when_it_happened_the_latest_first():
    pose = target_pose("where Carol left her phone", EVIDENCE, REGIONS, located)
    assert pose.evidence_id == "episodic_2" and (pose.x, pose.y) == (12.0, 3.0)  # both match; the later wins
    sofa = target_pose("the phone on the sofa", EVIDENCE, REGIONS, located)
    assert sofa.evidence_id == "episodic_1"
    assert target_pose("Dan's phone", EVIDENCE, REGIONS, located) is None  # every word must be in the memory


def test_a_place_only_named_in_memory_text_is_no_target():
    # "garage" is only said, in the kitchen: the robot's pose then is not the garage
    assert target_pose("the garage", EVIDENCE, REGIONS, located) is None
    assert target_pose("the attic", EVIDENCE, REGIONS, located) is None
    assert target_pose("me", EVIDENCE, REGIONS, located) is None


def test_entity_ids_in_memory_read_as_the_names_memory_knows():
    heard = said("episodic_9", '<voice_1> says: "I left my keys in the shed"', 500, Place("map", 3.0, 4.0, 0.0, ""))
    assert target_pose("where Dana left her keys", [heard], REGIONS, None, {"voice_1": "Dana"}).evidence_id == (
        "episodic_9"
    )
    assert target_pose("where Dana left her keys", [heard], REGIONS, None, {}) is None


def seen_last(label: str):
    """locate_object over a memory that saw a cup (last in the hall) and an umbrella, with no pose then."""
    things = {"cup": ("object_4", Place("map", 1.5, 8.0, 0.2, "hall"), 320 * S), "umbrella": ("object_7", None, 9 * S)}
    if label not in things:
        raise LookupError(label)
    return things[label]


def test_a_thing_seen_gives_where_the_robot_last_saw_one_and_a_thing_only_said_gives_nothing():
    pose = target_pose("the cup", EVIDENCE, REGIONS, located, {}, seen_last)
    assert (pose.x, pose.y, pose.stamp_ns, pose.evidence_id) == (1.5, 8.0, 320 * S, "object_4")
    assert pose.source == "where the robot last saw a cup"
    assert target_pose("my cups", EVIDENCE, REGIONS, located, {}, seen_last).evidence_id == "object_4"  # plural
    assert target_pose("the umbrella", EVIDENCE, REGIONS, located, {}, seen_last) is None  # seen with no pose
    assert target_pose("the garage", EVIDENCE, REGIONS, located, {}, seen_last) is None  # only said
    # a region or a remembered event comes first
    assert target_pose("the kitchen", EVIDENCE, REGIONS, located, {}, seen_last).source.startswith("region")
    assert target_pose("where Carol left her phone", EVIDENCE, REGIONS, located, {}, seen_last).evidence_id == (
        "episodic_2"
    )
