"""Where a navigate_to step goes: a pose from the regions file or from a recorded pose, never from words.

Why: a place named in memory text ("I put it in the garage") is not a place the robot knows how to reach,
and the robot's pose while it heard a place named is not that place. So a step's target pose comes, in
this order, from
1. a region of the regions file that the target names ("the kitchen": the region's centre);
2. a memory among the goal's evidence that the target describes as an event, with at least two of the
   target's words and all of them ("where Carol left her phone"): where the robot was when that happened
   (the memory's recorded place), the most recent such memory. A lone name of a thing or place ("the
   garage") gets no pose this way: the robot's pose while someone named it is not where it is;
3. a person the target only names ("Bob"): where that person was last seen or heard (locate_entity);
4. a thing the target names by its class ("the cup", "my umbrella"): where the robot was when it last saw
   an object of that class (locate_entity by label). Seen, not heard named: the robot was in view of it.
A target the user stands for ("me") or that none of these gives keeps no pose: the robot's navigation
must then resolve it (and the answer says where it is, when memory knows).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from m3_control.memory_client import Memory
from m3_control.names import with_names
from m3_control.skills import Step
from m3_memory.graph.records import Place
from m3_memory.place.regions import Regions

USER_WORDS = {"me", "my", "i", "user", "myself", "us"}
# words of a target that describe no particular thing
_STOP = {
    "the", "a", "an", "to", "where", "what", "which", "that", "this", "there", "here", "of", "in", "on", "at",
    "her", "his", "their", "my", "your", "our", "its", "was", "were", "is", "are", "has", "had", "left", "put",
    "last", "place", "spot", "one", "someone", "somebody", "thing",
}  # fmt: skip


@dataclass(frozen=True)
class TargetPose:
    """A navigation goal from memory: a pose in frame_id [m, rad], when the robot was there (0: a region),
    and what it came from (source: for people; evidence_id: the memory or entity, "" for a region)."""

    frame_id: str
    x: float
    y: float
    yaw: float
    stamp_ns: int
    source: str
    evidence_id: str = ""


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z'-]+", text.lower()) if w not in _STOP and len(w) > 2}


def region_target(target: str, regions: Regions) -> TargetPose | None:
    """The centre of the first region the target names."""
    named = regions.named_in(target)
    if not named:
        return None
    region = named[0]
    x, y = region.center
    return TargetPose(region.frame_id, x, y, 0.0, 0, f"region {region.name!r} of the regions file")


def person_target(target: str, locate: Callable[[str], tuple[str, Place | None, int]] | None) -> TargetPose | None:
    """Where the person the target names (a capitalised word, or an entity id) was last observed: locate
    gives (entity id, place or None, stamp) for a name, or raises LookupError when memory knows no such one."""
    ids_and_names = re.findall(r"<?((?:person|face|voice)_\d+)>?|\b([A-Z][a-z][\w'-]*)", target)
    named = {(entity or name).lower() for entity, name in ids_and_names}
    rest = _words(re.sub(r"<?(?:person|face|voice)_\d+>?", " ", target)) - named
    if locate is None or not named or rest:
        return None  # "Bob", "to Bob": a person; "where Carol left her phone" is an event (memory_target)
    for word in ids_and_names:
        name = word[0] or word[1]
        try:
            entity_id, place, stamp_ns = locate(name)
        except LookupError:
            continue
        if place is not None:
            return TargetPose(
                place.frame_id, place.x, place.y, place.yaw, stamp_ns, f"where {name} was last observed", entity_id
            )
    return None


def thing_target(target: str, locate_object: Callable[[str], tuple] | None) -> TargetPose | None:
    """Where the robot was when it last saw an object of the class the target names (one or two words left
    once articles and the user's words are set aside; a plural tries its singular too): locate_object gives
    (entity id, place or None, stamp) for a class, or raises LookupError when memory saw none."""
    words = [w for w in re.findall(r"[a-z][a-z'-]*", target.lower()) if w not in _STOP and w not in USER_WORDS]
    if locate_object is None or not 1 <= len(words) <= 2:
        return None
    label = " ".join(words)
    for candidate in dict.fromkeys([label, label[:-1] if label.endswith("s") else label]):
        try:
            entity_id, place, stamp_ns = locate_object(candidate)
        except LookupError:
            continue
        if place is not None:
            source = f"where the robot last saw a {candidate}"
            return TargetPose(place.frame_id, place.x, place.y, place.yaw, stamp_ns, source, entity_id)
    return None


def memory_target(target: str, evidence: list[Memory], names: dict[str, str] | None = None) -> TargetPose | None:
    """Where the robot was when the most recent memory holding all of the target's words (two or more;
    entity ids read as the names memory knows) happened."""
    wanted = _words(target)
    if len(wanted) < 2:
        return None
    memory = max(
        (m for m in evidence if m.place is not None and wanted <= _words(with_names(m.text, names or {}))),
        key=lambda m: m.end_ns,
        default=None,
    )
    if memory is None:
        return None
    place = memory.place
    source = f"where the robot was when memory {memory.node_id} happened"
    return TargetPose(place.frame_id, place.x, place.y, place.yaw, memory.end_ns, source, memory.node_id)


def target_pose(
    target: str,
    evidence: list[Memory],
    regions: Regions,
    locate: Callable[[str], tuple] | None = None,
    names: dict[str, str] | None = None,
    locate_object: Callable[[str], tuple] | None = None,
) -> TargetPose | None:
    """The pose a navigate_to step's target stands for (module docstring), or None. names: entity id -> name."""
    if not target.strip() or target.strip().lower() in USER_WORDS:
        return None
    return (
        region_target(target, regions)
        or person_target(target, locate)
        or memory_target(target, evidence, names)
        or thing_target(target, locate_object)
    )


def with_targets(
    plan: list[Step],
    evidence: list[Memory],
    names: dict[str, str],
    regions: Regions,
    locate: Callable[[str], tuple] | None = None,
    locate_object: Callable[[str], tuple] | None = None,
) -> list[Step]:
    """The plan with a pose on every navigate_to step whose target memory or the regions file can place."""
    return [
        replace(step, pose=target_pose(step.target, evidence, regions, locate, names, locate_object))
        if step.skill == "navigate_to"
        else step
        for step in plan
    ]
