"""Episode places: the script's regions, the robot's pose path through them, and what a replay is given."""

from __future__ import annotations

import math

import pytest

from m3_agent.demo.places import (
    POSE_TOPIC,
    TRANSIT_S,
    place_setup,
    pose_path,
    with_parameters,
    write_place_files,
)
from m3_agent.demo.timeline import EpisodeTruth, Scene, Utterance, validate
from m3_agent.recording.pose_track import load_poses
from m3_memory.place.regions import Regions

PLACES = {
    "frame_id": "map",
    "regions": {
        "Work Shop": {"polygon": [[0, 0], [4, 0], [4, 4], [0, 4]]},
        "porch": {"circle": {"center": [10, 0], "radius": 1.5}},
    },
}


def script(**extra) -> dict:
    base = {
        "episode_id": "p",
        "fps": 5,
        "width": 64,
        "height": 48,
        "people": {"ann": {"name": "Ann", "voice": "espeak:en-us"}},
        "scenes": [{"present": [], "lines": [["ann", "Hi."]]}],
        "questions": [{"q": "Who?", "a": "Ann", "type": ["Person Understanding"], "at": "end"}],
    }
    return {**base, **extra}


def truth() -> EpisodeTruth:
    lines = [Utterance("ann", "a", 1.5, 3.0), Utterance("ann", "b", 21.2, 23.0), Utterance("ann", "c", 40.3, 41.0)]
    scenes = [Scene([], 0.0, 20.0, "work  shop"), Scene([], 20.0, 40.0, "Porch"), Scene([], 40.0, 45.0, "porch")]
    return EpisodeTruth("p", 45.0, {}, lines, scenes)


def test_scripts_with_places_are_checked():
    assert validate(script()) == []
    scenes = [{"present": [], "place": "work shop", "lines": [["ann", "Hi."]]}]
    assert validate(script(places=PLACES, scenes=scenes)) == []  # names match as regions do: any case, spacing
    assert any("not one of places" in p for p in validate(script(places=PLACES)))  # a scene without a place
    unknown = [{"present": [], "place": "attic", "lines": [["ann", "Hi."]]}]
    assert any("'attic' is not one of places" in p for p in validate(script(places=PLACES, scenes=unknown)))
    assert any("has no places" in p for p in validate(script(scenes=scenes)))
    assert any("places must be" in p for p in validate(script(places=["kitchen"], scenes=scenes)))


def test_the_robot_stands_at_each_place_and_drives_before_the_first_line():
    anchors = {"work shop": (2.0, 2.0), "porch": (10.0, 0.0)}
    poses = pose_path(truth(), anchors, "map")
    times = [p.t_s for p in poses]
    assert times == sorted(set(times)) and times[0] == 0.0 and times[-1] == 45.0
    at = {p.t_s: p for p in poses}
    assert (at[1.5].x, at[1.5].y) == (2.0, 2.0) and (at[22.0].x, at[22.0].y) == (10.0, 0.0)
    arrived = 20.0 + min(TRANSIT_S, 21.2 - 20.0 - 0.1)
    assert (at[round(arrived, 3)].x, at[round(arrived, 3)].y) == (10.0, 0.0)  # there before its first line
    assert 2.0 < at[20.5].x < 10.0  # on the way
    assert math.isclose(at[30.0].yaw, math.atan2(-2.0, 8.0), abs_tol=1e-3)  # facing the way it drove
    assert all(p.frame_id == "map" for p in poses)


def test_place_files_feed_the_memory_and_control_nodes(tmp_path):
    files = write_place_files(script(places=PLACES), truth(), tmp_path)
    regions = Regions.load(files["regions"])
    poses = load_poses(files["poses"])  # the format m3 video2bag --poses reads
    assert {r.name for r in regions} == {"Work Shop", "porch"}
    assert regions.region_of(poses[0].x, poses[0].y) == "Work Shop"
    assert regions.region_of(poses[-1].x, poses[-1].y) == "porch"
    track, parameters = place_setup(tmp_path)
    assert track == tuple(poses)
    assert parameters["memory_node"] == {"pose_topic": POSE_TOPIC, "regions_file": str(tmp_path / "regions.yaml")}
    assert parameters["control_node"] == {"regions_file": str(tmp_path / "regions.yaml")}
    merged = with_parameters(
        {"memory_node": {"memorizer": "openai"}, "control_node": {"backend": "openai"}}, parameters
    )
    assert merged["memory_node"]["memorizer"] == "openai" and merged["memory_node"]["pose_topic"] == POSE_TOPIC
    assert write_place_files(script(), truth(), tmp_path) == {}  # re-rendered without places: none left behind
    assert place_setup(tmp_path) == ((), {})


@pytest.mark.parametrize(
    ("regions", "fault"),
    [
        ({"bad": {"polygon": [[0, 0], [2, 2], [2, 0], [0, 2]]}}, "self-intersecting"),
        ({"house": {"polygon": [[0, 0], [9, 0], [9, 9], [0, 9]]},
          "rug": {"circle": {"center": [4.5, 4.5], "radius": 1}}}, "lies in 'rug'"),
    ],
)  # fmt: skip
def test_places_a_memory_node_could_not_use_are_an_error(tmp_path, regions, fault):
    scenes = [Scene([], 0.0, 5.0, name) for name in regions]
    bad = EpisodeTruth("p", 5.0, {}, [], scenes)
    with pytest.raises(ValueError, match=fault):
        write_place_files(script(places={"regions": regions}), bad, tmp_path)


def test_the_demo_has_places_and_questions_about_them():
    import yaml

    from m3_agent.demo.generate import default_script

    demo = yaml.safe_load(default_script().read_text())
    assert validate(demo) == [] and len(demo["places"]["regions"]) >= 4
    assert len({s["place"] for s in demo["scenes"]}) >= 4  # the robot moves through the home
    rooms = [q for q in demo["questions"] if q["a"] in demo["places"]["regions"]]
    assert len(rooms) >= 5
