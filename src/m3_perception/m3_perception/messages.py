"""Stream times as builtin_interfaces/Time, and perception's results as the messages the node publishes:
faces, voices, face-voice matches, identity lists and voice revisions (the engine's), objects and text
(seeing's). Plain functions, so the node only publishes what they return."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from builtin_interfaces.msg import Time
from std_msgs.msg import Header

from m3_interfaces.msg import (
    EntityMatch,
    FaceObservation,
    FaceTracks,
    Identity,
    IdentityList,
    IdentityUpdate,
    ObjectTrack,
    ObjectTracks,
    TextRegion,
    TextRegions,
    VoiceSegment,
)
from m3_perception.seeing import Seen

if TYPE_CHECKING:
    from m3_perception.face_voice_matcher import MatchCandidate
    from m3_perception.faces.pipeline import FaceObs
    from m3_perception.identity_clusters import IdentityState
    from m3_perception.voices.pipeline import VoiceEvent
    from m3_perception.voices.revision import VoiceUpdate


def to_sec(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def to_time(t: float) -> Time:
    """Stream time as a Time; refused rather than wrapped when int32 seconds cannot hold it."""
    sec = math.floor(t)
    if not 0 <= sec < 2**31:
        raise ValueError(f"stream time {t:.3f} s does not fit builtin_interfaces/Time")
    return Time(sec=int(sec), nanosec=min(999_999_999, round((t - sec) * 1e9)))


def face_tracks(stamp: float, width: int, height: int, faces: list[FaceObs], frame_id: str, model: str) -> FaceTracks:
    """The faces of one processed frame; model: the face embedder's, named on faces that carry an embedding."""
    msg = FaceTracks(header=Header(stamp=to_time(stamp), frame_id=frame_id))
    msg.image_width, msg.image_height = width, height
    for o in faces:
        x, y, w, h = o.box
        msg.faces.append(
            FaceObservation(
                face_id=o.face_id,
                track_id=o.track_id,
                x=float(x),
                y=float(y),
                width=float(w),
                height=float(h),
                score=float(o.score),
                quality=float(o.quality),
                embedding=o.embedding.astype(float).tolist(),
                embedding_model=model if o.embedding.size else "",
                crop_jpeg=list(o.crop_jpeg),
            )
        )
    return msg


def voice_segment(ev: VoiceEvent, frame_id: str, model: str) -> VoiceSegment:
    """One utterance, stamped at its end; model: the voice embedder's."""
    return VoiceSegment(
        header=Header(stamp=to_time(ev.end), frame_id=frame_id),
        segment_id=ev.segment_id,
        voice_id=ev.voice_id,
        start=to_time(ev.start),
        end=to_time(ev.end),
        transcript=ev.transcript.text,
        asr_confidence=float(ev.transcript.confidence),
        language=ev.transcript.language,
        embedding=ev.embedding.astype(float).tolist(),
        embedding_model=model,
    )


def entity_match(c: MatchCandidate) -> EntityMatch:
    """A face and a voice found to be one person, with the evidence so far."""
    return EntityMatch(
        header=Header(stamp=to_time(c.stamp)),
        id1=c.face_id,
        id1_type=EntityMatch.FACE,
        id2=c.voice_id,
        id2_type=EntityMatch.VOICE,
        confidence=float(c.confidence),
        evidence_count=c.evidence_count,
    )


def identity_list(kind: str, stamp: float, idents: list[IdentityState]) -> IdentityList:
    """Every face (kind "face") or voice identity known at stamp."""
    msg = IdentityList(header=Header(stamp=to_time(stamp)))
    k = EntityMatch.FACE if kind == "face" else EntityMatch.VOICE
    for i in idents:
        msg.identities.append(
            Identity(
                id=i.id,
                kind=k,
                observation_count=i.observation_count,
                first_seen=to_time(i.first_seen),
                last_seen=to_time(i.last_seen),
                crop_jpeg=list(i.best_crop()),
                merged_into=i.merged_into,
            )
        )
    return msg


def identity_update(u: VoiceUpdate, frame_id: str) -> IdentityUpdate:
    """A revision of voices: merged ids and utterances given to another voice."""
    return IdentityUpdate(
        header=Header(stamp=to_time(u.stamp), frame_id=frame_id),
        kind=EntityMatch.VOICE,
        merged_ids=[gone for gone, _ in u.merges],
        merged_into=[keep for _, keep in u.merges],
        segment_ids=[seg for seg, _, _ in u.corrections],
        previous_ids=[before for _, before, _ in u.corrections],
        corrected_ids=[now for _, _, now in u.corrections],
    )


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
