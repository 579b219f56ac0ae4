"""PoseTrack and friends: the memory node's "where was the robot at stream time t" must be right at the
edges (yaw across ±pi, out-of-order odometry, a clip window reaching past the track), not only mid-track."""

from __future__ import annotations

import math
import threading

import pytest

from m3_memory.place.poses import (
    NS_PER_S,
    ClipsAwaitingPoses,
    PoseSample,
    PoseTrack,
    downsample,
    pose_on,
    yaw_from_quaternion,
)

S = NS_PER_S


def pose(t_s: float, x: float = 0.0, y: float = 0.0, yaw: float = 0.0, frame_id: str = "map") -> PoseSample:
    return PoseSample(round(t_s * S), x, y, yaw, frame_id)


def test_sample_yaw_is_normalised_to_half_open_range() -> None:
    assert pose(0, yaw=3 * math.pi / 2).yaw == pytest.approx(-math.pi / 2)
    assert pose(0, yaw=-math.pi).yaw == math.pi
    assert pose(0, yaw=math.pi).yaw == math.pi
    assert pose(0, yaw=4 * math.pi + 0.25).yaw == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("q", "yaw"),
    [
        ((0.0, 0.0, 0.0, 1.0), 0.0),
        ((0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4)), math.pi / 2),
        ((0.0, 0.0, 1.0, 0.0), math.pi),  # half turn: +pi, not -pi
        ((0.0, 0.0, -math.sin(math.pi / 8), math.cos(math.pi / 8)), -math.pi / 4),
        ((0.0, 0.0, 2 * math.sin(math.pi / 6), 2 * math.cos(math.pi / 6)), math.pi / 3),  # not unit
    ],
)
def test_yaw_from_quaternion(q: tuple[float, float, float, float], yaw: float) -> None:
    assert yaw_from_quaternion(*q) == pytest.approx(yaw)


def test_yaw_from_quaternion_ignores_roll_and_pitch_of_a_level_heading() -> None:
    # 0.2 rad roll and 30 degrees yaw (ZYX): the heading stays 30 degrees.
    cr, sr, cy, sy = math.cos(0.1), math.sin(0.1), math.cos(math.pi / 12), math.sin(math.pi / 12)
    assert yaw_from_quaternion(cy * sr, sy * sr, sy * cr, cy * cr) == pytest.approx(math.pi / 6, abs=1e-9)


@pytest.mark.parametrize("q", [(0.0, 0.0, 0.0, 0.0), (math.nan, 0.0, 0.0, 1.0), (0.0, 0.0, math.inf, 1.0)])
def test_yaw_from_quaternion_rejects_degenerate(q: tuple[float, float, float, float]) -> None:
    with pytest.raises(ValueError):
        yaw_from_quaternion(*q)


def test_downsampling_keeps_on_step_turn_or_gap_only() -> None:
    track = PoseTrack(min_step_m=0.05, min_turn_rad=0.1, max_gap_ns=1 * S)
    assert track.add(pose(0.0)) is True  # first sample
    assert track.add(pose(0.1, x=0.04)) is False  # 4 cm: too little
    assert track.latest == pose(0.1, x=0.04)  # but remembered as latest
    assert track.add(pose(0.2, x=0.05)) is True  # 5 cm from the last kept sample
    assert track.add(pose(0.3, x=0.05, yaw=0.09)) is False
    assert track.add(pose(0.4, x=0.05, yaw=-0.1)) is True  # turned 0.1 rad
    assert track.add(pose(1.3, x=0.05, yaw=-0.1)) is False  # 0.9 s since kept
    assert track.add(pose(1.4, x=0.05, yaw=-0.1)) is True  # 1.0 s since kept
    assert len(track) == 4
    assert track.between(0, 2 * S)[-1] == pose(1.4, x=0.05, yaw=-0.1)


def test_turn_threshold_measures_the_short_way_across_pi() -> None:
    track = PoseTrack(min_turn_rad=0.1)
    track.add(pose(0.0, yaw=math.pi - 0.02))
    assert track.add(pose(0.1, yaw=-math.pi + 0.02)) is False  # 0.04 rad apart, not ~2pi
    assert track.add(pose(0.2, yaw=-math.pi + 0.09)) is True  # 0.11 rad


def test_drop_decision_is_against_last_kept_not_last_received() -> None:
    track = PoseTrack(min_step_m=0.05)
    track.add(pose(0.0))
    for i in range(1, 4):  # creeping 3 cm at a time: each step small, but the sum is not
        kept = track.add(pose(i * 0.1, x=0.03 * i))
        assert kept is (i == 2)
    assert len(track) == 2


def test_rejects_wrong_frame_non_finite_and_out_of_order() -> None:
    track = PoseTrack(frame_id="map")
    assert track.add(pose(1.0, x=1.0)) is True
    assert track.add(pose(2.0, x=5.0, frame_id="odom")) is False
    assert track.add(pose(2.0, x=math.nan)) is False
    assert track.add(pose(2.0, y=math.inf)) is False
    assert track.add(PoseSample(2 * S, 5.0, 0.0, math.nan)) is False
    assert track.add(pose(1.0, x=9.0)) is False  # duplicate stamp
    assert track.add(pose(0.5, x=9.0)) is False  # older
    assert len(track) == 1 and track.latest == pose(1.0, x=1.0)


def test_stamp_between_last_kept_and_latest_is_out_of_order() -> None:
    track = PoseTrack()
    track.add(pose(1.0))
    track.add(pose(1.5, x=0.01))  # dropped, but latest
    assert track.add(pose(1.2, x=3.0)) is False  # would move latest backwards
    assert track.latest == pose(1.5, x=0.01)


def test_prunes_samples_older_than_keep() -> None:
    track = PoseTrack(keep_ns=10 * S, max_gap_ns=1 * S)
    for t in range(0, 21):
        track.add(pose(t, x=float(t)))
    assert len(track) == 11  # 10..20: stamps >= newest - keep
    assert track.at(9 * S, tolerance_ns=0) is None
    assert track.at(10 * S) == pose(10, x=10.0)


def test_pruning_follows_latest_even_when_dropped() -> None:
    track = PoseTrack(keep_ns=5 * S, max_gap_ns=100 * S)
    track.add(pose(0.0))
    track.add(pose(3.0, x=1.0))
    track.add(pose(7.0, x=1.01))  # dropped (1 cm), but the newest stamp
    assert len(track) == 1
    assert track.between(0, 10 * S) == [pose(3.0, x=1.0), pose(7.0, x=1.01)]


def test_at_interpolates_position_and_exact_stamps() -> None:
    track = PoseTrack()
    track.add(pose(10.0, x=0.0, y=0.0, yaw=0.0))
    track.add(pose(12.0, x=2.0, y=-4.0, yaw=1.0))
    mid = track.at(round(10.5 * S))
    assert mid is not None
    assert (mid.stamp_ns, mid.x, mid.y, mid.yaw, mid.frame_id) == (
        round(10.5 * S),
        pytest.approx(0.5),
        pytest.approx(-1.0),
        pytest.approx(0.25),
        "map",
    )
    assert track.at(12 * S) == pose(12.0, x=2.0, y=-4.0, yaw=1.0)


def test_at_interpolates_yaw_the_short_way_across_pi() -> None:
    track = PoseTrack()
    track.add(pose(0.0, yaw=math.pi - 0.2))
    track.add(pose(1.0, yaw=-math.pi + 0.2))
    assert track.at(S // 2).yaw == pytest.approx(math.pi)  # through pi, not through 0
    quarter = track.at(S * 3 // 4).yaw
    assert quarter == pytest.approx(-math.pi + 0.1)
    assert -math.pi < quarter <= math.pi


def test_at_uses_a_dropped_latest_for_now() -> None:
    track = PoseTrack(min_step_m=0.05, max_gap_ns=10 * S)
    track.add(pose(0.0, x=0.0))
    track.add(pose(2.0, x=0.04))  # dropped
    assert len(track) == 1
    assert track.at(S).x == pytest.approx(0.02)
    assert track.at(2 * S) == pose(2.0, x=0.04)
    assert track.at(3 * S).x == pytest.approx(0.04)  # past the end, within tolerance: the latest


def test_at_outside_track_within_and_beyond_tolerance() -> None:
    track = PoseTrack()
    assert track.at(0) is None  # empty
    track.add(pose(10.0, x=1.0))
    track.add(pose(20.0, x=2.0))
    assert track.at(8 * S) == pose(10.0, x=1.0)
    assert track.at(8 * S - 1) is None
    assert track.at(22 * S) == pose(20.0, x=2.0)
    assert track.at(22 * S + 1) is None
    assert track.at(25 * S, tolerance_ns=5 * S) == pose(20.0, x=2.0)


def test_between_adds_interpolated_ends_when_track_extends_past_them() -> None:
    track = PoseTrack(max_gap_ns=1 * S)
    for t in range(0, 11):
        track.add(pose(t, x=float(t)))
    path = track.between(round(2.5 * S), round(5.5 * S))
    assert [p.stamp_ns for p in path] == [round(2.5 * S), 3 * S, 4 * S, 5 * S, round(5.5 * S)]
    assert [p.x for p in path] == pytest.approx([2.5, 3.0, 4.0, 5.0, 5.5])
    # Ends on samples: no duplicates.
    assert [p.stamp_ns for p in track.between(2 * S, 4 * S)] == [2 * S, 3 * S, 4 * S]


def test_between_window_inside_one_interval_and_instant() -> None:
    track = PoseTrack()
    track.add(pose(0.0, x=0.0))
    track.add(pose(10.0, x=10.0))
    assert [p.x for p in track.between(2 * S, 3 * S)] == pytest.approx([2.0, 3.0])
    assert [p.x for p in track.between(4 * S, 4 * S)] == pytest.approx([4.0])


def test_between_window_past_the_track_edges() -> None:
    track = PoseTrack(max_gap_ns=1 * S)
    for t in (10, 11, 12):
        track.add(pose(t, x=float(t)))
    # Starts before the track: begins at its first sample, no invented pose at the start.
    assert [p.stamp_ns for p in track.between(5 * S, round(11.5 * S))] == [10 * S, 11 * S, round(11.5 * S)]
    # Ends after the track: finishes at its last sample.
    assert [p.stamp_ns for p in track.between(round(10.5 * S), 20 * S)] == [round(10.5 * S), 11 * S, 12 * S]
    assert track.between(0, 9 * S) == []
    assert track.between(13 * S, 20 * S) == []
    assert track.between(12 * S, 10 * S) == []  # reversed window
    assert PoseTrack().between(0, 10 * S) == []


def test_pose_on_a_stored_path() -> None:
    path = [pose(0.0, x=0.0, yaw=math.pi - 0.1), pose(4.0, x=8.0, yaw=-math.pi + 0.1)]
    mid = pose_on(path, 2 * S, 0)
    assert (mid.x, mid.yaw) == (pytest.approx(4.0), math.pi)
    assert pose_on(path, 4 * S, 0) is path[1]
    assert pose_on(path, 5 * S, 1 * S) is path[1]
    assert pose_on(path, 5 * S + 1, 1 * S) is None
    assert pose_on(path, -S, 1 * S) is path[0]
    assert pose_on([], 0) is None


def test_clear_forgets_everything() -> None:
    track = PoseTrack()
    track.add(pose(5.0, x=1.0))
    track.clear()
    assert len(track) == 0 and track.latest is None and track.at(5 * S) is None
    assert track.add(pose(1.0)) is True  # older than before the clear: accepted again


def test_concurrent_adds_and_reads_stay_ordered() -> None:
    track = PoseTrack(max_gap_ns=1, keep_ns=10**12)
    stop = threading.Event()
    errors: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            stamps = [p.stamp_ns for p in track.between(0, 10**12)]
            if stamps != sorted(stamps):
                errors.append("unordered")

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(1, 3001):
        track.add(PoseSample(i * 1000, float(i), 0.0, 0.0))
    stop.set()
    thread.join()
    assert errors == [] and len(track) == 3000


def test_downsample_keeps_ends_and_even_spacing() -> None:
    samples = [pose(t, x=float(t)) for t in range(11)]
    assert [p.x for p in downsample(samples, 3)] == [0.0, 5.0, 10.0]
    assert [p.x for p in downsample(samples, 6)] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert [p.x for p in downsample(samples, 2)] == [0.0, 10.0]
    picked = downsample(samples, 4)
    assert len(picked) == 4 and picked[0] is samples[0] and picked[-1] is samples[-1]
    assert downsample(samples, 11) == samples and downsample(samples, 50) == samples
    assert downsample([], 5) == []


def test_downsample_rejects_fewer_than_two() -> None:
    with pytest.raises(ValueError):
        downsample([pose(0), pose(1)], 1)


class _Clip:
    def __init__(self, end_s: float) -> None:
        self.end_ns = int(end_s * NS_PER_S)


def test_a_closed_clip_waits_for_a_pose_at_its_end_then_goes() -> None:
    waiting = ClipsAwaitingPoses(wait_ns=5 * NS_PER_S)
    first, second = _Clip(10), _Clip(20)
    waiting.hold([first, second], now_ns=0)
    assert waiting.release(latest_stamp_ns=None, now_ns=1) == []  # no pose yet
    assert waiting.release(latest_stamp_ns=9 * NS_PER_S, now_ns=2) == []  # the track has not reached 10 s
    assert waiting.release(latest_stamp_ns=12 * NS_PER_S, now_ns=3) == [first]  # 20 s not reached: held
    assert len(waiting) == 1
    assert waiting.release(latest_stamp_ns=20 * NS_PER_S, now_ns=4) == [second]


def test_a_clip_goes_without_poses_when_its_wait_is_over_and_never_overtakes() -> None:
    waiting = ClipsAwaitingPoses(wait_ns=5 * NS_PER_S)
    early, late = _Clip(10), _Clip(20)
    waiting.hold([early], now_ns=0)
    waiting.hold([late], now_ns=3 * NS_PER_S)
    assert waiting.release(latest_stamp_ns=None, now_ns=5 * NS_PER_S - 1) == []
    assert waiting.release(latest_stamp_ns=None, now_ns=5 * NS_PER_S) == [early]  # a robot standing still
    assert waiting.release(latest_stamp_ns=None, now_ns=8 * NS_PER_S) == [late]
    waiting.hold([_Clip(30), _Clip(40)], now_ns=0)
    assert len(waiting.release(latest_stamp_ns=None, now_ns=0, everything=True)) == 2  # the stream ended
    with pytest.raises(ValueError):
        ClipsAwaitingPoses(wait_ns=-1)
