"""Where the robot is during a scripted episode: the script's named places and a pose path through them.

A script may name the places of its home (`places:`, in the memory node's regions-file format) and give
every scene a `place`. The generator then writes, beside the video:
- `regions.yaml`: those regions, checked by the memory node's own loader (m3_memory.place.regions);
- `poses.json`: the robot's pose track (m3_agent.recording.pose_track's JSON): the robot stands at its
  scene's place (the region's centroid) and drives there from the previous scene's place during the
  first TRANSIT_S seconds of the scene, before its first line; a pose every POSE_PERIOD_S.
Replaying such an episode (`place_setup`) writes the track into the bag as AMCL's topic and gives the
memory and control nodes the regions file, so memories have places and "take me to the kitchen" has a
goal. Why a track and not a label per line: the memory node learns places only from poses, as on a robot.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml

from m3_agent.demo.timeline import EpisodeTruth, place_key
from m3_agent.recording.pose_track import TrackPose, load_poses

POSE_PERIOD_S = 0.5  # AMCL publishes a few poses a second
TRANSIT_S = 1.0  # the drive from one scene's place to the next, at the scene's start [s]
POSE_TOPIC = "/amcl_pose"
REGIONS_FILE = "regions.yaml"
POSES_FILE = "poses.json"


def _anchors(regions_path: Path) -> tuple[dict[str, tuple[float, float]], str]:
    """Each region's standing point (its centroid, or a circle's centre) by place key, and the map frame.
    The point must lie in that region and in no smaller one (else memories there would be labelled
    with another place)."""
    from m3_memory.place.regions import Regions

    regions = Regions.load(str(regions_path))
    anchors = {}
    for region in regions:
        x, y = region.center
        if regions.region_of(x, y) != region.name:
            raise ValueError(
                f"place {region.name!r}: its centre ({x:.2f}, {y:.2f}) lies in {regions.region_of(x, y)!r}; "
                "give it a shape whose centre is inside it and in no smaller place"
            )
        anchors[place_key(region.name)] = (x, y)
    return anchors, regions.frame_id


def pose_path(truth: EpisodeTruth, anchors: dict[str, tuple[float, float]], frame_id: str) -> list[TrackPose]:
    """The robot's poses over the whole episode: at each scene's place, driving between places at a scene's
    start (ending before its first line when the scene leaves time for it)."""
    moves: list[tuple[float, float, tuple[float, float], tuple[float, float]]] = []  # (t0, t1, from, to)
    here = anchors[place_key(truth.scenes[0].place)]
    for scene in truth.scenes:
        there = anchors[place_key(scene.place)]
        if there != here:
            first_line = min((u.start_s for u in truth.utterances if u.start_s >= scene.start_s), default=scene.end_s)
            t1 = scene.start_s + max(0.2, min(TRANSIT_S, first_line - scene.start_s - 0.1))
            moves.append((scene.start_s, t1, here, there))
            here = there
    times = {round(i * POSE_PERIOD_S, 3) for i in range(int(truth.duration_s / POSE_PERIOD_S) + 1)}
    times |= {round(t, 3) for t0, t1, _, _ in moves for t in (t0, t1)}
    poses: list[TrackPose] = []
    position, yaw = anchors[place_key(truth.scenes[0].place)], 0.0
    for t in sorted(times):
        for t0, t1, start, end in moves:
            if t >= t0:
                yaw = math.atan2(end[1] - start[1], end[0] - start[0])  # facing the way it drove
                share = min(1.0, (t - t0) / (t1 - t0))
                position = (start[0] + share * (end[0] - start[0]), start[1] + share * (end[1] - start[1]))
        poses.append(TrackPose(t, round(position[0], 4), round(position[1], 4), round(yaw, 4), frame_id))
    return poses


def write_place_files(script: dict, truth: EpisodeTruth, out_dir: Path) -> dict[str, str]:
    """regions.yaml and poses.json in out_dir for a script with places ({} without); ValueError for places
    the memory node could not use."""
    from m3_memory.place.regions import RegionsError

    for name in (REGIONS_FILE, POSES_FILE):
        (out_dir / name).unlink(missing_ok=True)  # a script without places leaves none from an earlier render
    if not script.get("places"):
        return {}
    regions_path = out_dir / REGIONS_FILE
    regions_path.write_text(yaml.safe_dump(script["places"], sort_keys=False, default_flow_style=None))
    try:
        anchors, frame_id = _anchors(regions_path)
    except RegionsError as error:
        raise ValueError(f"episode {truth.episode_id}: places: {error}") from error
    poses = pose_path(truth, anchors, frame_id)
    rows = ",\n".join(json.dumps({"t": p.t_s, "x": p.x, "y": p.y, "yaw": p.yaw}) for p in poses)  # a pose a line
    (out_dir / POSES_FILE).write_text(f'{{"frame_id": {json.dumps(frame_id)}, "poses": [\n{rows}\n]}}\n')
    return {"regions": str(regions_path), "poses": str(out_dir / POSES_FILE)}


def place_parameters(episode_dir: str | Path) -> dict[str, dict[str, object]]:
    """Node parameters for a rendered episode: memory follows POSE_TOPIC with the episode's regions, and
    control plans to them; {} without place files."""
    episode_dir = Path(episode_dir)
    regions = episode_dir / REGIONS_FILE
    if not (regions.exists() and (episode_dir / POSES_FILE).exists()):
        return {}
    return {
        "memory_node": {"pose_topic": POSE_TOPIC, "regions_file": str(regions.resolve())},
        "control_node": {"regions_file": str(regions.resolve())},
    }


def place_setup(episode_dir: str | Path) -> tuple[tuple[TrackPose, ...], dict[str, dict[str, object]]]:
    """(pose track for the bag, place_parameters) of a rendered episode; ((), {}) without place files."""
    parameters = place_parameters(episode_dir)
    return (tuple(load_poses(Path(episode_dir) / POSES_FILE)) if parameters else ()), parameters


def with_parameters(overrides: dict, extra: dict) -> dict:
    """overrides with extra's node parameters added (extra wins for the parameters it names)."""
    merged = {node: dict(params) for node, params in (overrides or {}).items()}
    for node, params in extra.items():
        merged.setdefault(node, {}).update(params)
    return merged
