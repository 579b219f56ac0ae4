"""Regions: a hand-written map file must either load into regions that label poses correctly (overlaps,
boundaries, names in questions) or fail with a message naming the file and the region at fault."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from m3_memory.place.regions import Region, Regions, RegionsError

HOUSE = """\
frame_id: map
regions:
  kitchen:
    polygon: [[0.0, 0.0], [4.0, 0.0], [4.0, 3.0], [0.0, 3.0]]
  front door:
    circle: {center: [5.0, 1.0], radius: 0.8}
  living room:
    polygon: [[0, 3], [0, 10], [8, 10], [8, 3]]   # clockwise, integers
  sofa:
    circle: {center: [2.0, 6.0], radius: 1.0}
  door:
    circle: {center: [-3.0, -3.0], radius: 0.5}
  hall:
    polygon: [[4, 0], [10, 0], [10, 3], [4, 3], [4, 0]]   # explicitly closed
"""


def write(tmp_path: Path, text: str, name: str = "regions.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def house(tmp_path: Path) -> Regions:
    return Regions.load(write(tmp_path, HOUSE))


def test_load_keeps_file_order_shapes_and_frame(house: Regions) -> None:
    assert house.frame_id == "map" and len(house) == 6
    assert [r.name for r in house] == ["kitchen", "front door", "living room", "sofa", "door", "hall"]
    kitchen = house.get("kitchen")
    assert kitchen.polygon == ((0.0, 0.0), (4.0, 0.0), (4.0, 3.0), (0.0, 3.0))
    assert kitchen.center == pytest.approx((2.0, 1.5)) and kitchen.radius == 0.0 and kitchen.frame_id == "map"
    door = house.get("front door")
    assert (door.polygon, door.center, door.radius) == ((), (5.0, 1.0), 0.8)
    assert len(house.get("hall").polygon) == 4  # closing vertex dropped


def test_frame_id_defaults_to_map(tmp_path: Path) -> None:
    regions = Regions.load(write(tmp_path, "regions:\n  a: {circle: {center: [0, 0], radius: 1}}\n"))
    assert regions.frame_id == "map" and regions.get("a").frame_id == "map"
    odom = Regions.load(write(tmp_path, "frame_id: odom\nregions: {}\n", "odom.yaml"))
    assert odom.frame_id == "odom" and len(odom) == 0


def test_polygon_geometry() -> None:
    # An L shape: area 3, centroid (5/6, 5/6), not the vertex mean.
    ell = Region("ell", "map", polygon=((0, 0), (2, 0), (2, 1), (1, 1), (1, 2), (0, 2)))
    assert ell.area == pytest.approx(3.0)
    assert ell.center == pytest.approx((5 / 6, 5 / 6))
    assert ell.bounds() == (0.0, 0.0, 2.0, 2.0)
    assert ell.contains(0.5, 1.5) and ell.contains(1.5, 0.5)
    assert not ell.contains(1.5, 1.5)  # the notch
    assert ell.contains(2.0, 0.5) and ell.contains(1.0, 1.5) and ell.contains(0.0, 0.0)  # boundary, vertex
    assert ell.distance_to(0.5, 0.5) == 0.0
    assert ell.distance_to(1.5, 1.5) == pytest.approx(0.5)
    assert ell.distance_to(3.0, 3.0) == pytest.approx(math.sqrt(5.0))  # nearest: vertex (2, 1) or (1, 2)
    assert ell.distance_to(3.0, 0.5) == pytest.approx(1.0)  # nearest: an edge's inside point
    assert ell.distance_to(-1.0, 0.5) == pytest.approx(1.0)


def test_circle_geometry() -> None:
    c = Region("c", "map", center=(1.0, -1.0), radius=2.0)
    assert c.area == pytest.approx(4 * math.pi)
    assert c.bounds() == (-1.0, -3.0, 3.0, 1.0)
    assert c.contains(3.0, -1.0) and c.contains(1.0, 1.0) and not c.contains(3.01, -1.0)
    assert c.distance_to(1.0, -1.0) == 0.0
    assert c.distance_to(1.0, 4.0) == pytest.approx(3.0)


def test_region_rejects_bad_shape_when_built_directly() -> None:
    with pytest.raises(ValueError):
        Region("none", "map")
    with pytest.raises(ValueError):
        Region("two", "map", polygon=((0, 0), (1, 0)))


def test_region_of_smallest_wins_and_frame(house: Regions) -> None:
    assert house.region_of(1.0, 1.0) == "kitchen"
    assert house.region_of(6.0, 8.0) == "living room"
    assert house.region_of(2.0, 6.5) == "sofa"  # inside living room too: smaller wins
    assert house.region_of(4.5, 1.0) == "front door"  # inside hall too
    assert house.region_of(2.0, 3.0) == "kitchen"  # shared edge: kitchen (12 m^2) < living room (56 m^2)
    assert house.region_of(20.0, 20.0) == ""
    assert house.region_of(1.0, 1.0, "map") == "kitchen"
    assert house.region_of(1.0, 1.0, "odom") == ""
    assert house.region_of(math.nan, 1.0) == ""
    assert Regions.empty().region_of(0.0, 0.0) == ""


def test_get_ignores_case_and_spacing(house: Regions) -> None:
    assert house.get("Front  Door").name == "front door"
    assert house.get("  KITCHEN ").name == "kitchen"
    assert house.get("front") is None


def test_named_in_whole_words_longest_first(house: Regions) -> None:
    names = lambda text: [r.name for r in house.named_in(text)]  # noqa: E731
    assert names("the front door") == ["front door"]  # not also "door"
    assert names("Was the FRONT  DOOR open?") == ["front door"]
    assert names("in the kitchen or the hall") == ["kitchen", "hall"]
    assert names("the kitchenette") == []
    assert names("hallway and the back door") == ["door"]
    assert names("front door, then the door of the kitchen") == ["front door", "kitchen", "door"]
    assert names("the living room sofa") == ["living room", "sofa"]
    assert names("kitchen's table") == ["kitchen"]
    assert names("") == []


def test_duplicate_names_case_insensitive() -> None:
    a = Region("Kitchen", "map", center=(0, 0), radius=1)
    b = Region("kitchen", "map", center=(5, 5), radius=1)
    with pytest.raises(RegionsError, match="kitchen"):
        Regions([a, b])


def test_duplicate_names_in_file_name_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "regions:\n  Hall: {circle: {center: [0, 0], radius: 1}}\n  hall: {circle: {center: [3, 0], radius: 1}}\n",
    )
    with pytest.raises(RegionsError) as e:
        Regions.load(path)
    assert path in str(e.value) and "hall" in str(e.value).lower()


def test_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(RegionsError, match=r"nope\.yaml"):
        Regions.load(path)


def test_directory_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(RegionsError, match=str(tmp_path)):
        Regions.load(str(tmp_path))


def test_file_larger_than_one_mib(tmp_path: Path) -> None:
    path = write(tmp_path, "regions: {}\n" + "#" * (1024 * 1024) + "\n")
    with pytest.raises(RegionsError, match=r"regions\.yaml"):
        Regions.load(path)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("regions: [unclosed\n", "not YAML"),
        ("- a\n- b\n", "not a mapping"),
        ("", "not a mapping"),
        ("frame_id: map\n", "no 'regions' mapping"),
        ("regions: [kitchen]\n", "no 'regions' mapping"),
        ("frame_id: ''\nregions: {}\n", "frame_id"),
    ],
)
def test_file_level_errors_name_the_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RegionsError) as e:
        Regions.load(path)
    assert path in str(e.value) and fragment in str(e.value)


@pytest.mark.parametrize(
    ("region", "fragment"),
    [
        ("{}", "neither"),
        ("{polygon: [[0, 0], [1, 0], [0, 1]], circle: {center: [0, 0], radius: 1}}", "both"),
        ("{polygon: [[0, 0], [1, 0]]}", "at least 3 vertices"),
        ("{polygon: [[0, 0], [1, 0], [0, 0]]}", "at least 3 vertices"),  # closed ring of 2
        ("{polygon: [[0, 0], [one, 0], [0, 1]]}", "not a number"),
        ("{polygon: [[0, 0], [true, 0], [0, 1]]}", "not a number"),
        ("{polygon: [[0, 0], [1, 0, 2], [0, 1]]}", "[x, y]"),
        ("{polygon: [[0, 0], [.nan, 0], [0, 1]]}", "not finite"),
        ("{polygon: [[0, 0], [.inf, 0], [0, 1]]}", "not finite"),
        ("{polygon: 7}", "list"),
        ("{polygon: [[0, 0], [2, 2], [2, 0], [0, 2]]}", "self-intersecting"),  # bow tie
        ("{polygon: [[0, 0], [2, 0], [1, 0], [1, 1]]}", "self-intersecting"),  # folds back
        ("{polygon: [[0, 0], [2, 0], [2, 2], [0, 2], [2, 0], [3, -1]]}", "self-intersecting"),  # touches a vertex
        ("{polygon: [[0, 0], [1, 1], [2, 2]]}", "zero area"),
        ("{polygon: [[0, 0], [1, 1], [3, 3], [2, 2]]}", "zero area"),
        ("{polygon: [[0, 0], [1, 0], [1, 0], [0, 1]]}", "repeats vertex"),
        ("{circle: {center: [0, 0], radius: 0}}", "radius must be > 0"),
        ("{circle: {center: [0, 0], radius: -1}}", "radius must be > 0"),
        ("{circle: {center: [0, 0], radius: .nan}}", "not finite"),
        ("{circle: {center: [0, x], radius: 1}}", "not a number"),
        ("{circle: {center: [0, 0]}}", "circle needs"),
        ("{circle: [0, 0, 1]}", "circle needs"),
        ("[0, 0]", "expected a mapping"),
    ],
)
def test_region_errors_name_the_file_and_region(tmp_path: Path, region: str, fragment: str) -> None:
    text = f"regions:\n  fine: {{circle: {{center: [9, 9], radius: 1}}}}\n  bad spot: {region}\n"
    path = write(tmp_path, text)
    with pytest.raises(RegionsError) as e:
        Regions.load(path)
    message = str(e.value)
    assert path in message and "'bad spot'" in message and fragment in message


@pytest.mark.parametrize("name", ["''", "'   '", "null", "42"])
def test_empty_or_non_text_name(tmp_path: Path, name: str) -> None:
    path = write(tmp_path, f"regions:\n  {name}: {{circle: {{center: [0, 0], radius: 1}}}}\n")
    with pytest.raises(RegionsError) as e:
        Regions.load(path)
    assert path in str(e.value) and "name" in str(e.value)


def test_regions_error_is_a_value_error() -> None:
    assert issubclass(RegionsError, ValueError)


def test_empty_regions() -> None:
    empty = Regions.empty("odom")
    assert empty.frame_id == "odom" and len(empty) == 0 and list(empty) == []
    assert empty.get("kitchen") is None and empty.named_in("the kitchen") == []
