"""Messages of the memory node <-> m3_memory's dataclasses and stamps (plain functions, no node)."""

from __future__ import annotations

from collections.abc import Mapping

from builtin_interfaces.msg import Time

from m3_interfaces.msg import ClipMemory, MemoryItem
from m3_interfaces.msg import Place as PlaceMsg
from m3_interfaces.msg import Sighting as SightingMsg
from m3_memory import errors
from m3_memory.errors import MemoryApiError
from m3_memory.graph.records import KIND_VOICE, ClipRecord, Place, Sighting, TextNode
from m3_memory.graph.tags import kind_of
from m3_memory.search.api import MemorySearch, SearchHit
from m3_memory.search.as_of import AsOfError, stamp_ns
from m3_memory.search.where import Where

NS = 1_000_000_000


def to_ns(stamp: Time) -> int:
    return int(stamp.sec) * NS + int(stamp.nanosec)


def request_stamp_ns(stamp: Time) -> int:
    """A request's before_stamp as ns; INVALID_ARGUMENT when it is not a valid time (nanosec >= 1e9, negative)."""
    try:
        return stamp_ns(int(stamp.sec), int(stamp.nanosec))
    except AsOfError as error:
        raise MemoryApiError(errors.INVALID_ARGUMENT, str(error)) from None


def to_time(ns: int) -> Time:
    return Time(sec=int(ns // NS), nanosec=int(ns % NS))


def item_msg(
    node: TextNode | SearchHit, score: float = 0.0, robot_id: str = "", names: Mapping[str, str] | None = None
) -> MemoryItem:
    """A MemoryItem; robot_id: the storing robot of a TextNode (a SearchHit carries its own, and its
    entity names); names: id -> name for a TextNode of a search's clip (ClipRecord.names)."""
    if isinstance(node, SearchHit):
        entity_names = list(node.entity_names)
    else:
        entity_names = [names.get(i, "") for i in node.entity_ids] if names else []
    return MemoryItem(
        node_id=node.node_id,
        kind=node.kind,
        text=node.text,
        clip_index=int(node.clip_index),
        start=to_time(node.start_ns),
        end=to_time(node.end_ns),
        entity_ids=list(node.entity_ids),
        weight=float(node.weight),
        score=float(getattr(node, "score", score) if isinstance(node, SearchHit) else score),
        robot_id=node.robot_id if isinstance(node, SearchHit) else robot_id,
        place=place_msg(node.place),
        valid_until=to_time(node.valid_until_ns),
        superseded_by=node.superseded_by,
        entity_names=entity_names,
    )


def place_msg(place: Place | None) -> PlaceMsg:
    if place is None:
        return PlaceMsg()
    return PlaceMsg(known=True, frame_id=place.frame_id, x=place.x, y=place.y, yaw=place.yaw, region=place.region)


def sighting_msg(sighting: Sighting) -> SightingMsg:
    how = "heard" if kind_of(sighting.entity_id) == KIND_VOICE else "seen"  # faces and things are seen
    return SightingMsg(
        entity_id=sighting.entity_id,
        how=how,
        clip_index=int(sighting.clip_index),
        first=to_time(sighting.first_ns),
        last=to_time(sighting.last_ns),
        place=place_msg(sighting.place),
    )


def request_where(search: MemorySearch, request) -> Where:
    """A SearchNode / SearchClip request's time and place window (after_stamp, place), checked."""
    f, stamp = request.place, request.after_stamp
    try:
        after_ns = stamp_ns(int(stamp.sec), int(stamp.nanosec))
    except AsOfError as error:
        raise MemoryApiError(errors.INVALID_ARGUMENT, str(error).replace("before_stamp", "after_stamp")) from None
    return search.where(after_ns, f.region, f.x, f.y, f.radius_m)


def clip_msg(record: ClipRecord) -> ClipMemory:
    msg = ClipMemory(
        clip_index=int(record.clip_index),
        start=to_time(record.start_ns),
        end=to_time(record.end_ns),
        score=float(record.score),
        entity_ids=list(record.entity_ids),
        robot_id=record.robot_id,
        heard=record.heard,
    )
    msg.header.stamp = to_time(record.end_ns)
    scores, names = record.node_scores, record.names
    msg.episodic = [item_msg(n, scores.get(n.node_id, 0.0), record.robot_id, names) for n in record.episodic]
    msg.semantic = [item_msg(n, scores.get(n.node_id, 0.0), record.robot_id, names) for n in record.semantic]
    return msg
