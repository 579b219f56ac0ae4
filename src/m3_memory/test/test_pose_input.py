"""The pose input's message conversion: every accepted pose type gives the same PoseSample on the stream
clock, and a pose the track cannot use is refused with a reason (the node drops it, with a warning)."""

from __future__ import annotations

import math

import pytest
from geometry_msgs.msg import PoseStamped, PoseWithCovarianceStamped
from nav_msgs.msg import Odometry

from m3_memory.assembly import load_regions
from m3_memory.node_parameters import PARAMETERS
from m3_memory.place.regions import RegionsError
from m3_memory.pose_input import POSE_TYPES, _types, check_pose_type, pose_sample


def filled(msg, pose, x: float, y: float, yaw: float):
    msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = 12, 500_000_000, "map"
    pose.position.x, pose.position.y = x, y
    pose.orientation.z, pose.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
    return msg


@pytest.mark.parametrize("pose_type", POSE_TYPES)
def test_every_pose_type_gives_the_same_sample(pose_type):
    msg_type, pose_of = _types()[pose_type]
    assert msg_type in (PoseStamped, PoseWithCovarianceStamped, Odometry)
    msg = msg_type()
    sample = pose_sample(filled(msg, pose_of(msg), 3.5, -2.0, 2.0), pose_of)
    assert (sample.stamp_ns, sample.x, sample.y, sample.frame_id) == (12_500_000_000, 3.5, -2.0, "map")
    assert math.isclose(sample.yaw, 2.0, abs_tol=1e-9)


def test_unusable_poses_are_refused_with_a_reason():
    _, pose_of = _types()["pose_stamped"]
    msg = PoseStamped()
    filled(msg, msg.pose, 1.0, 1.0, 0.0)
    msg.pose.orientation.z = msg.pose.orientation.w = 0.0
    with pytest.raises(ValueError, match="no orientation"):
        pose_sample(msg, pose_of)
    filled(msg, msg.pose, math.inf, 1.0, 0.0)
    with pytest.raises(ValueError, match="not finite"):
        pose_sample(msg, pose_of)


def test_a_bad_pose_type_or_regions_file_fails_configure(tmp_path):
    with pytest.raises(ValueError, match="pose_type must be one of pose_stamped"):
        check_pose_type("tf")
    p = {name: default for name, (default, _) in PARAMETERS.items() if name != "autostart"}
    (tmp_path / "r.yaml").write_text("frame_id: odom\nregions:\n  hall: {circle: {center: [0, 0], radius: 1}}\n")
    with pytest.raises(RegionsError, match="frame 'odom', but pose_frame_id is 'map'"):
        load_regions({**p, "regions_file": str(tmp_path / "r.yaml")})
    assert len(load_regions({**p, "regions_file": str(tmp_path / "r.yaml"), "pose_frame_id": "odom"})) == 1
    assert len(load_regions(p)) == 0
