"""Perception's messages -> m3_memory's evidence records (plain functions, no node): what the memory
node subscribes to. Id checks that drop one item with a warning stay in the node; a revision that does
not hold together is refused whole here (ValueError), so the node never applies half of it."""

from __future__ import annotations

from m3_interfaces.msg import (
    EntityMatch,
    FaceObservation,
    IdentityUpdate,
    ObjectTrack,
    ObjectTracks,
    TextRegion,
    TextRegions,
    VoiceSegment,
)
from m3_memory.graph.records import (
    KIND_VOICE,
    FaceEvidence,
    MatchEvidence,
    ObjectEvidence,
    TextEvidence,
    VoiceEvidence,
    VoiceRevision,
)
from m3_memory.graph.tags import kind_of
from m3_memory.memory_msgs import to_ns


def face_evidence(face: FaceObservation, stamp_ns: int) -> FaceEvidence:
    """One face of a FaceTracks message (stamped with the message's header)."""
    return FaceEvidence(
        face.face_id,
        int(face.track_id),
        (face.x, face.y, face.width, face.height),
        float(face.score),
        stamp_ns,
        list(face.embedding),
        bytes(face.crop_jpeg),
        float(face.quality),
    )


def object_evidence(track: ObjectTrack, stamp_ns: int) -> ObjectEvidence:
    """One object of an ObjectTracks message (stamped with the message's header), with its crop when sent."""
    box = (float(track.x), float(track.y), float(track.width), float(track.height))
    crop = bytes(track.crop_jpeg)
    return ObjectEvidence(track.object_id, track.label.strip(), float(track.confidence), box, stamp_ns, crop)


def text_evidence(region: TextRegion, stamp_ns: int) -> TextEvidence:
    """One region of a TextRegions message (stamped with the message's header)."""
    box = (float(region.x), float(region.y), float(region.width), float(region.height))
    return TextEvidence(region.region_id, region.text.strip(), float(region.confidence), box, stamp_ns)


def seen_evidence(msg: ObjectTracks | TextRegions) -> list[ObjectEvidence | TextEvidence]:
    """The evidence of one ObjectTracks or TextRegions (the memory node's, and a replay's); an object without
    an id or label, or a region without an id or text, is left out."""
    stamp = to_ns(msg.header.stamp)
    if isinstance(msg, ObjectTracks):
        return [object_evidence(t, stamp) for t in msg.objects if t.object_id and t.label.strip()]
    return [text_evidence(r, stamp) for r in msg.regions if r.region_id and r.text.strip()]


def voice_evidence(msg: VoiceSegment) -> VoiceEvidence:
    return VoiceEvidence(
        msg.voice_id,
        to_ns(msg.start),
        to_ns(msg.end),
        msg.transcript,
        float(msg.asr_confidence),
        list(msg.embedding),
        int(msg.segment_id),
    )


def match_evidence(msg: EntityMatch) -> MatchEvidence:
    return MatchEvidence(
        msg.id1,
        msg.id2,
        float(msg.confidence),
        int(msg.evidence_count),
        to_ns(msg.header.stamp),
        int(msg.id1_type),
        int(msg.id2_type),
    )


def _voice_ids(ids, field: str, allow_empty: bool = False) -> list[str]:
    for voice_id in ids:
        if not (allow_empty and voice_id == "") and kind_of(voice_id) != KIND_VOICE:
            raise ValueError(f"{field} holds {voice_id!r}, not a voice_N id")
    return list(ids)


def voice_revision(msg: IdentityUpdate) -> VoiceRevision:
    """A voice IdentityUpdate as a VoiceRevision; ValueError when it is not one (another kind, arrays of
    different lengths, ids that are not voice_N, a merge of an id into itself)."""
    if msg.kind != EntityMatch.VOICE:
        raise ValueError(f"kind {msg.kind} is not EntityMatch.VOICE ({EntityMatch.VOICE})")
    if len(msg.merged_ids) != len(msg.merged_into):
        raise ValueError(f"{len(msg.merged_ids)} merged_ids but {len(msg.merged_into)} merged_into")
    lengths = {len(msg.segment_ids), len(msg.previous_ids), len(msg.corrected_ids)}
    if len(lengths) != 1:
        raise ValueError(
            f"segment_ids, previous_ids, corrected_ids differ in length "
            f"({len(msg.segment_ids)}, {len(msg.previous_ids)}, {len(msg.corrected_ids)})"
        )
    gone, into = _voice_ids(msg.merged_ids, "merged_ids"), _voice_ids(msg.merged_into, "merged_into")
    merges = list(zip(gone, into, strict=True))
    if any(gone == into for gone, into in merges):
        raise ValueError("a voice is merged into itself")
    previous = _voice_ids(msg.previous_ids, "previous_ids", allow_empty=True)
    corrected = _voice_ids(msg.corrected_ids, "corrected_ids", allow_empty=True)
    corrections = [(int(s), p, c) for s, p, c in zip(msg.segment_ids, previous, corrected, strict=True)]
    return VoiceRevision(to_ns(msg.header.stamp), merges, corrections)
