"""Named regions of the map, so a pose can be called "kitchen" and "in the kitchen" can find poses.

A regions file is YAML, all regions in one map frame:

    frame_id: map            # optional, default map
    regions:
      kitchen:
        polygon: [[0.0, 0.0], [4.0, 0.0], [4.0, 3.0], [0.0, 3.0]]   # metres, >= 3 vertices, any winding
      front door:
        circle: {center: [5.0, 1.0], radius: 0.8}                      # metres, radius > 0

Each region has exactly one of `polygon` (a simple polygon: not self-intersecting, non-zero area; a closing
vertex equal to the first is allowed and dropped) or `circle`; other keys of a region are ignored. Names are
matched case- and whitespace-insensitively and must be unique that way. Where regions overlap, a point belongs
to the smallest (a "sofa" circle inside a "living room"). Regions.load raises RegionsError, naming the file
and the region or field at fault, for anything it cannot use; the file may be at most 1 MiB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

MAX_FILE_BYTES = 1024 * 1024
_EPS = 1e-9
Point = tuple[float, float]


class RegionsError(ValueError):
    """A regions file that cannot be used; the message names the file and the region/field at fault."""


def _cross(o: Point, a: Point, b: Point) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _signed_area(poly: tuple[Point, ...] | list[Point]) -> float:
    """Shoelace area, positive counter-clockwise."""
    n = len(poly)
    return sum(poly[i][0] * poly[(i + 1) % n][1] - poly[(i + 1) % n][0] * poly[i][1] for i in range(n)) / 2.0


def _centroid(poly: tuple[Point, ...]) -> Point:
    """Area centroid (the vertex mean would lean towards densely sampled edges)."""
    a = _signed_area(poly)
    if a == 0.0:
        return (sum(p[0] for p in poly) / len(poly), sum(p[1] for p in poly) / len(poly))
    n, cx, cy = len(poly), 0.0, 0.0
    for i in range(n):
        (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % n]
        c = x1 * y2 - x2 * y1
        cx, cy = cx + (x1 + x2) * c, cy + (y1 + y2) * c
    return (cx / (6.0 * a), cy / (6.0 * a))


def _segment_distance(p: Point, a: Point, b: Point) -> float:
    dx, dy = b[0] - a[0], b[1] - a[1]
    length2 = dx * dx + dy * dy
    t = 0.0 if length2 == 0.0 else max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / length2))
    return math.hypot(p[0] - (a[0] + t * dx), p[1] - (a[1] + t * dy))


def _on_segment(p: Point, a: Point, b: Point) -> bool:
    return (
        abs(_cross(a, b, p)) <= _EPS
        and min(a[0], b[0]) - _EPS <= p[0] <= max(a[0], b[0]) + _EPS
        and min(a[1], b[1]) - _EPS <= p[1] <= max(a[1], b[1]) + _EPS
    )


def _segments_touch(a: Point, b: Point, c: Point, d: Point) -> bool:
    d1, d2, d3, d4 = _cross(c, d, a), _cross(c, d, b), _cross(a, b, c), _cross(a, b, d)
    if ((d1 > _EPS and d2 < -_EPS) or (d1 < -_EPS and d2 > _EPS)) and (
        (d3 > _EPS and d4 < -_EPS) or (d3 < -_EPS and d4 > _EPS)
    ):
        return True
    return _on_segment(a, c, d) or _on_segment(b, c, d) or _on_segment(c, a, b) or _on_segment(d, a, b)


def _polygon_defect(poly: list[Point]) -> str:
    """Why a vertex ring is not a simple polygon with area ("" when it is one)."""
    n = len(poly)
    for k in range(n):
        if poly[k] == poly[(k + 1) % n]:
            return f"repeats vertex {k}"
    if all(abs(_cross(poly[0], poly[1], p)) <= _EPS for p in poly):
        return "has zero area (its vertices lie on one line)"
    for k in range(n):  # adjacent edges folding back onto each other
        prev, cur, nxt = poly[k - 1], poly[k], poly[(k + 1) % n]
        if _on_segment(prev, cur, nxt) or _on_segment(nxt, prev, cur):
            return f"is self-intersecting (folds back at vertex {k})"
    for i in range(n):
        for j in range(i + 2, n):
            if i == 0 and j == n - 1:
                continue  # adjacent through the closing edge
            if _segments_touch(poly[i], poly[(i + 1) % n], poly[j], poly[(j + 1) % n]):
                return f"is self-intersecting (edges {i} and {j})"
    return "has zero area" if abs(_signed_area(poly)) <= _EPS else ""


def _key(name: str) -> str:
    """Lookup form of a name: case-folded, runs of whitespace as one space."""
    return " ".join(name.split()).casefold()


@dataclass(frozen=True)
class Region:
    """One named area: a polygon or a circle, in frame_id, metres."""

    name: str
    frame_id: str
    polygon: tuple[tuple[float, float], ...] = ()  # vertices, when a polygon
    center: tuple[float, float] = (0.0, 0.0)  # when a circle; for a polygon: its area centroid
    radius: float = 0.0  # when a circle, > 0

    def __post_init__(self) -> None:
        # Floats whatever was passed, and a polygon's center always its centroid, so equal regions compare equal.
        polygon = tuple((float(x), float(y)) for x, y in self.polygon)
        object.__setattr__(self, "polygon", polygon)
        if polygon:
            if len(polygon) < 3 or self.radius != 0.0:
                raise ValueError(f"region {self.name!r}: a polygon needs >= 3 vertices and no radius")
            object.__setattr__(self, "center", _centroid(polygon))
        else:
            if not self.radius > 0.0:
                raise ValueError(f"region {self.name!r}: a circle needs radius > 0")
            object.__setattr__(self, "center", (float(self.center[0]), float(self.center[1])))
            object.__setattr__(self, "radius", float(self.radius))

    def contains(self, x: float, y: float) -> bool:
        """True inside or on the boundary."""
        if not self.polygon:
            return math.hypot(x - self.center[0], y - self.center[1]) <= self.radius + _EPS
        if self._edge_distance(x, y) <= _EPS:
            return True
        inside = False
        n = len(self.polygon)
        for i in range(n):
            (x1, y1), (x2, y2) = self.polygon[i], self.polygon[(i + 1) % n]
            if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
                inside = not inside
        return inside

    @property
    def area(self) -> float:
        """Area in m^2 (decides which of overlapping regions a point is in)."""
        if not self.polygon:
            return math.pi * self.radius * self.radius
        return abs(_signed_area(self.polygon))

    def bounds(self) -> tuple[float, float, float, float]:
        """(min_x, min_y, max_x, max_y)."""
        if not self.polygon:
            cx, cy, r = self.center[0], self.center[1], self.radius
            return (cx - r, cy - r, cx + r, cy + r)
        xs, ys = [p[0] for p in self.polygon], [p[1] for p in self.polygon]
        return (min(xs), min(ys), max(xs), max(ys))

    def distance_to(self, x: float, y: float) -> float:
        """0 inside, else metres to the nearest boundary point ("near the kitchen")."""
        if self.contains(x, y):
            return 0.0
        if not self.polygon:
            return math.hypot(x - self.center[0], y - self.center[1]) - self.radius
        return self._edge_distance(x, y)

    def _edge_distance(self, x: float, y: float) -> float:
        n = len(self.polygon)
        return min(_segment_distance((x, y), self.polygon[i], self.polygon[(i + 1) % n]) for i in range(n))


class Regions:
    """The named regions of one map, in file order."""

    def __init__(self, regions: list[Region], frame_id: str = "map") -> None:
        self.frame_id = frame_id
        self._regions: list[Region] = list(regions)
        self._by_key: dict[str, Region] = {}
        for region in self._regions:
            key = _key(region.name)
            if not key:
                raise RegionsError("a region has an empty name")
            if key in self._by_key:
                raise RegionsError(f"region {region.name!r}: duplicate of {self._by_key[key].name!r}")
            if region.frame_id != frame_id:
                raise RegionsError(f"region {region.name!r}: frame {region.frame_id!r}, not the map's {frame_id!r}")
            self._by_key[key] = region
        # Longest names first, so "front door" claims its words before a "door" region can.
        ordered = sorted(self._regions, key=lambda r: -len(_key(r.name)))
        self._patterns = [(r, re.compile(_name_pattern(r.name), re.IGNORECASE)) for r in ordered]

    @classmethod
    def load(cls, path: str) -> Regions:
        """Read and validate a regions file; RegionsError naming the file and region/field otherwise."""
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except OSError as e:
            raise RegionsError(f"{path}: cannot read: {e.strerror or e}") from e
        if len(raw) > MAX_FILE_BYTES:
            raise RegionsError(f"{path}: more than the {MAX_FILE_BYTES} bytes allowed")
        try:
            doc = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise RegionsError(f"{path}: not YAML: {e}") from e
        if not isinstance(doc, dict):
            raise RegionsError(f"{path}: not a mapping (expected 'frame_id' and 'regions')")
        frame_id = doc.get("frame_id", "map")
        if not isinstance(frame_id, str) or not frame_id.strip():
            raise RegionsError(f"{path}: 'frame_id' must be a non-empty string, got {frame_id!r}")
        frame_id = frame_id.strip()
        entries = doc.get("regions")
        if not isinstance(entries, dict):
            raise RegionsError(f"{path}: no 'regions' mapping")
        regions = [_parse_region(path, name, spec, frame_id) for name, spec in entries.items()]
        try:
            return cls(regions, frame_id)
        except RegionsError as e:
            raise RegionsError(f"{path}: {e}") from e

    @classmethod
    def empty(cls, frame_id: str = "map") -> Regions:
        """No regions (no file configured): every point is in region ""."""
        return cls([], frame_id)

    def __len__(self) -> int:
        return len(self._regions)

    def __iter__(self) -> Iterator[Region]:
        return iter(self._regions)

    def get(self, name: str) -> Region | None:
        """The region of that name, ignoring case and spacing ("Front  Door" finds "front door")."""
        return self._by_key.get(_key(name))

    def region_of(self, x: float, y: float, frame_id: str | None = None) -> str:
        """Name of the smallest region containing the point; "" when none, or when frame_id differs from the map's."""
        if frame_id is not None and frame_id != self.frame_id:
            return ""
        if not (math.isfinite(x) and math.isfinite(y)):
            return ""
        best: Region | None = None
        for region in self._regions:
            if region.contains(x, y) and (best is None or region.area < best.area):
                best = region
        return best.name if best is not None else ""

    def named_in(self, text: str) -> list[Region]:
        """Regions named in text as whole words; longest names first, each claiming its words so none overlap."""
        taken: list[tuple[int, int]] = []
        found: list[Region] = []
        for region, pattern in self._patterns:
            for m in pattern.finditer(text):
                if all(m.end() <= s or m.start() >= e for s, e in taken):
                    taken.append(m.span())
                    if region not in found:
                        found.append(region)
        return found


def _name_pattern(name: str) -> str:
    """Whole-word regex for a name, any whitespace between its words."""
    return r"(?<!\w)" + r"\s+".join(re.escape(w) for w in name.split()) + r"(?!\w)"


def _number(path: str, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RegionsError(f"{path}: {where}: {value!r} is not a number")
    if not math.isfinite(value):
        raise RegionsError(f"{path}: {where}: {value!r} is not finite")
    return float(value)


def _point(path: str, where: str, value: Any) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise RegionsError(f"{path}: {where}: {value!r} is not an [x, y] pair")
    return (_number(path, where, value[0]), _number(path, where, value[1]))


def _parse_region(path: str, name: Any, spec: Any, frame_id: str) -> Region:
    """One region entry, validated; RegionsError names the file, the region and the field."""
    if not isinstance(name, str) or not name.strip():
        raise RegionsError(f"{path}: region name {name!r} is empty or not text")
    name = " ".join(name.split())
    label = f"region {name!r}"
    if not isinstance(spec, dict):
        raise RegionsError(f"{path}: {label}: expected a mapping with 'polygon' or 'circle'")
    has_polygon, has_circle = "polygon" in spec, "circle" in spec
    if has_polygon == has_circle:
        which = "both" if has_polygon else "neither"
        raise RegionsError(f"{path}: {label}: has {which} of 'polygon' and 'circle' (exactly one needed)")
    if has_circle:
        circle = spec["circle"]
        if not isinstance(circle, dict) or "center" not in circle or "radius" not in circle:
            raise RegionsError(f"{path}: {label}: circle needs {{center: [x, y], radius: r}}")
        center = _point(path, f"{label}: circle.center", circle["center"])
        radius = _number(path, f"{label}: circle.radius", circle["radius"])
        if radius <= 0:
            raise RegionsError(f"{path}: {label}: circle.radius must be > 0, got {radius}")
        return Region(name, frame_id, center=center, radius=radius)
    vertices = spec["polygon"]
    if not isinstance(vertices, list | tuple):
        raise RegionsError(f"{path}: {label}: polygon must be a list of [x, y] vertices")
    points = [_point(path, f"{label}: polygon vertex {i}", v) for i, v in enumerate(vertices)]
    if len(points) > 1 and points[0] == points[-1]:
        points.pop()  # an explicitly closed ring
    if len(points) < 3:
        raise RegionsError(f"{path}: {label}: polygon needs at least 3 vertices, got {len(points)}")
    defect = _polygon_defect(points)
    if defect:
        raise RegionsError(f"{path}: {label}: polygon {defect}")
    return Region(name, frame_id, polygon=tuple(points))
