"""Stream times as builtin_interfaces/Time, and the seeing results (objects, text) as messages."""

from __future__ import annotations

import math

from builtin_interfaces.msg import Time
from std_msgs.msg import Header

from m3_interfaces.msg import ObjectTrack, ObjectTracks, TextRegion, TextRegions
from m3_perception.seeing import Seen


def to_sec(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def to_time(t: float) -> Time:
    """Stream time as a Time; refused rather than wrapped when int32 seconds cannot hold it."""
    sec = math.floor(t)
    if not 0 <= sec < 2**31:
        raise ValueError(f"stream time {t:.3f} s does not fit builtin_interfaces/Time")
    return Time(sec=int(sec), nanosec=min(999_999_999, round((t - sec) * 1e9)))


def object_tracks(seen: Seen, frame_id: str) -> ObjectTracks:
    """The objects of one detected frame (an empty list when none was found)."""
    msg = ObjectTracks(header=Header(stamp=to_time(seen.stamp), frame_id=frame_id))
    msg.image_width, msg.image_height = seen.width, seen.height
    for o in seen.objects or []:
        x, y, w, h = o.box
        msg.objects.append(
            ObjectTrack(
                object_id=o.object_id,
                label=o.label,
                confidence=float(o.confidence),
                x=float(x),
                y=float(y),
                width=float(w),
                height=float(h),
                first_seen=to_time(o.first_seen),
                last_seen=to_time(o.last_seen),
                crop_jpeg=o.crop_jpeg,
            )
        )
    return msg


def text_regions(seen: Seen, frame_id: str) -> TextRegions:
    """The text regions read in one keyframe (an empty list when it held no text)."""
    msg = TextRegions(header=Header(stamp=to_time(seen.stamp), frame_id=frame_id))
    msg.image_width, msg.image_height = seen.width, seen.height
    for r in seen.texts or []:
        x, y, w, h = r.box
        msg.regions.append(
            TextRegion(
                region_id=r.region_id,
                text=r.text,
                confidence=float(r.confidence),
                x=float(x),
                y=float(y),
                width=float(w),
                height=float(h),
                first_seen=to_time(r.first_seen),
                last_seen=to_time(r.last_seen),
                is_new=r.is_new,
            )
        )
    return msg
