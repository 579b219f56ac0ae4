"""The robot's recent planar poses on the stream clock, so a clip can say where the robot was.

PoseTrack keeps a downsampled track (a sample every `min_step_m` moved, `min_turn_rad` turned or
`max_gap_ns` passed) of the last `keep_ns`, plus the latest pose received, and answers "where at time t"
(`at`, interpolated) and "which path during a window" (`between`). `pose_on` answers "where at t" on a
stored path, and `downsample` bounds a path's points for storage. `ClipsAwaitingPoses` holds a closed clip
until the track reaches its end. Plain Python; the node feeds it from its odometry / localisation callback.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

NS_PER_S = 1_000_000_000
MAX_PATH_SAMPLES = 32  # a clip's stored path: enough for a map of the robot's way, bounded per clip
PLACE_TOLERANCE_NS = 2 * NS_PER_S  # a memory's time may lie this far outside a clip's path and still get its end


def _wrap(angle: float) -> float:
    """Angle in (-pi, pi], so equal headings compare equal whatever turns produced them."""
    wrapped = math.remainder(angle, math.tau)
    return math.pi if wrapped <= -math.pi else wrapped


@dataclass(frozen=True)
class PoseSample:
    """The robot's pose in the plane at one stream time: metres and radians in frame_id."""

    stamp_ns: int
    x: float
    y: float
    yaw: float  # radians, normalised to (-pi, pi]
    frame_id: str = "map"

    def __post_init__(self) -> None:
        # Normalise here so every consumer sees one representation; non-finite yaw is left for add() to reject.
        if math.isfinite(self.yaw):
            object.__setattr__(self, "yaw", _wrap(float(self.yaw)))


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    """Planar yaw (rad, in (-pi, pi]) of a quaternion; the formula is scale-free, so it need not be unit."""
    if not all(math.isfinite(v) for v in (x, y, z, w)):
        raise ValueError(f"quaternion ({x}, {y}, {z}, {w}) is not finite")
    if x * x + y * y + z * z + w * w == 0.0:
        raise ValueError("quaternion (0, 0, 0, 0) has no orientation")
    return _wrap(math.atan2(2.0 * (w * z + x * y), w * w + x * x - y * y - z * z))


def _interpolate(a: PoseSample, b: PoseSample, stamp_ns: int) -> PoseSample:
    """Pose between a and b (a.stamp_ns < stamp_ns < b.stamp_ns): linear x, y; yaw the short way round."""
    f = (stamp_ns - a.stamp_ns) / (b.stamp_ns - a.stamp_ns)
    yaw = a.yaw + f * _wrap(b.yaw - a.yaw)
    return PoseSample(stamp_ns, a.x + f * (b.x - a.x), a.y + f * (b.y - a.y), yaw, a.frame_id)


def pose_on(path: list[PoseSample], stamp_ns: int, tolerance_ns: int = 2 * NS_PER_S) -> PoseSample | None:
    """Pose at stamp_ns on a stamp-ordered path (a track's, or a stored clip's): interpolated between neighbours,
    the exact sample on equal stamps, an end sample within tolerance_ns outside the path, else None."""
    if not path:
        return None
    stamps = [p.stamp_ns for p in path]
    i = bisect.bisect_left(stamps, stamp_ns)
    if i < len(path) and stamps[i] == stamp_ns:
        return path[i]
    if i == 0:
        return path[0] if stamps[0] - stamp_ns <= tolerance_ns else None
    if i == len(path):
        return path[-1] if stamp_ns - stamps[-1] <= tolerance_ns else None
    return _interpolate(path[i - 1], path[i], stamp_ns)


class PoseTrack:
    """Recent poses, downsampled, in stamp order; thread-safe (a ROS callback adds while the clip closer reads)."""

    def __init__(
        self,
        frame_id: str = "map",
        min_step_m: float = 0.05,
        min_turn_rad: float = 0.1,
        max_gap_ns: int = 1 * NS_PER_S,
        keep_ns: int = 600 * NS_PER_S,
    ) -> None:
        if min_step_m < 0 or min_turn_rad < 0 or max_gap_ns < 0 or keep_ns < 0:
            raise ValueError("PoseTrack thresholds must be >= 0")
        self.frame_id = frame_id
        self.min_step_m = min_step_m
        self.min_turn_rad = min_turn_rad
        self.max_gap_ns = max_gap_ns
        self.keep_ns = keep_ns
        self._lock = threading.Lock()
        self._kept: list[PoseSample] = []
        self._stamps: list[int] = []  # parallel to _kept, for bisect
        self._latest: PoseSample | None = None

    def add(self, sample: PoseSample) -> bool:
        """Offer one pose; True when it was kept as a track sample.

        False when rejected (wrong frame, non-finite, not newer than the latest pose received) and also when
        it was too close to the last kept sample; a valid dropped sample still becomes `latest`.
        """
        if sample.frame_id != self.frame_id:
            return False
        if not (math.isfinite(sample.x) and math.isfinite(sample.y) and math.isfinite(sample.yaw)):
            return False
        with self._lock:
            if self._latest is not None and sample.stamp_ns <= self._latest.stamp_ns:
                return False
            keep = self._should_keep(sample)
            if keep:
                self._kept.append(sample)
                self._stamps.append(sample.stamp_ns)
            self._latest = sample
            cut = bisect.bisect_left(self._stamps, sample.stamp_ns - self.keep_ns)
            if cut:
                del self._kept[:cut]
                del self._stamps[:cut]
            return keep

    def _should_keep(self, sample: PoseSample) -> bool:
        """Keep on enough motion, turn or time since the last kept sample (called under the lock)."""
        if not self._kept:
            return True
        ref = self._kept[-1]
        return (
            math.hypot(sample.x - ref.x, sample.y - ref.y) >= self.min_step_m
            or abs(_wrap(sample.yaw - ref.yaw)) >= self.min_turn_rad
            or sample.stamp_ns - ref.stamp_ns >= self.max_gap_ns
        )

    @property
    def latest(self) -> PoseSample | None:
        """The newest valid pose received, kept or not."""
        with self._lock:
            return self._latest

    def __len__(self) -> int:
        """Number of kept samples (not counting a dropped `latest`)."""
        with self._lock:
            return len(self._kept)

    def _points(self) -> list[PoseSample]:
        """Kept samples plus latest when it was dropped: everything interpolation may use (under the lock)."""
        points = list(self._kept)
        if self._latest is not None and (not points or self._latest.stamp_ns > points[-1].stamp_ns):
            points.append(self._latest)
        return points

    def at(self, stamp_ns: int, tolerance_ns: int = 2 * NS_PER_S) -> PoseSample | None:
        """Pose at stamp_ns, interpolated between neighbours; an end sample within tolerance_ns outside the track."""
        with self._lock:
            points = self._points()
        return pose_on(points, stamp_ns, tolerance_ns)

    def between(self, start_ns: int, end_ns: int) -> list[PoseSample]:
        """Path during [start_ns, end_ns]: samples inside plus interpolated ends where the track extends past them."""
        if start_ns > end_ns:
            return []
        with self._lock:
            points = self._points()
        stamps = [p.stamp_ns for p in points]
        lo = bisect.bisect_left(stamps, start_ns)
        hi = bisect.bisect_right(stamps, end_ns)
        path = points[lo:hi]
        # An interpolated end needs a sample on each side of it, and none exactly on it.
        if 0 < lo < len(points) and stamps[lo] != start_ns:
            path.insert(0, _interpolate(points[lo - 1], points[lo], start_ns))
        if 0 < hi < len(points) and stamps[hi - 1] != end_ns and (not path or path[-1].stamp_ns != end_ns):
            path.append(_interpolate(points[hi - 1], points[hi], end_ns))
        return path

    def clear(self) -> None:
        """Forget everything (the stream jumped, or the map changed)."""
        with self._lock:
            self._kept.clear()
            self._stamps.clear()
            self._latest = None


def downsample(samples: list[PoseSample], max_samples: int) -> list[PoseSample]:
    """At most max_samples: first, last and evenly spaced ones between, so a stored path stays bounded."""
    if max_samples < 2:
        raise ValueError(f"max_samples must be >= 2, got {max_samples}")
    n = len(samples)
    if n <= max_samples:
        return list(samples)
    return [samples[round(i * (n - 1) / (max_samples - 1))] for i in range(max_samples)]


class ClipsAwaitingPoses:
    """Closed clips held until the pose track has reached their end, in order, each for at most wait_ns.

    Evidence and poses are different topics, and DDS orders nothing across topics: a busy node can take the
    utterance that closes a clip before the poses of that clip. As tf2's MessageFilter waits for a transform,
    a clip waits for a pose at or past its end (wall time, up to wait_ns), then goes with what the track has
    (a robot standing still may publish no poses at all). Clips leave in the order they closed.
    """

    def __init__(self, wait_ns: int) -> None:
        if wait_ns < 0:
            raise ValueError("ClipsAwaitingPoses wait must be >= 0")
        self.wait_ns = wait_ns
        self._held: deque[tuple[Any, int]] = deque()  # (clip with .end_ns, wall deadline [ns])

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, clips: list, now_ns: int) -> None:
        """Hold newly closed clips (anything with end_ns on the stream clock)."""
        self._held.extend((clip, now_ns + self.wait_ns) for clip in clips)

    def release(self, latest_stamp_ns: int | None, now_ns: int, everything: bool = False) -> list:
        """The clips that may go now: the track reached their end, their wait is over, or `everything`
        (the stream ended); a clip never overtakes one closed before it."""
        ready = []
        while self._held:
            clip, deadline = self._held[0]
            reached = latest_stamp_ns is not None and latest_stamp_ns >= clip.end_ns
            if not (everything or reached or now_ns >= deadline):
                break
            ready.append(self._held.popleft()[0])
        return ready
