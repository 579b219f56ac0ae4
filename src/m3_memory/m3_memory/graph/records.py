"""Plain dataclasses: perception evidence in (mirrors of the m3_interfaces messages) and memory records out.

Times are integer nanoseconds on the stream clock, so clips and as-of limits compare exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

KIND_EPISODIC = "episodic"
KIND_SEMANTIC = "semantic"
KIND_FACE = "face"
KIND_VOICE = "voice"
KIND_PERSON = "person"
KIND_OBJECT = "object"  # a thing perception's detector tracked (its class is the entity's label)
KIND_TEXT = "text"  # a piece of written text perception read at one place (its reading is the label)
TEXT_KINDS = (KIND_EPISODIC, KIND_SEMANTIC)
PEOPLE_ENTITY_KINDS = (KIND_FACE, KIND_VOICE, KIND_PERSON)
THING_KINDS = (KIND_OBJECT, KIND_TEXT)  # seen, not people: no person, no name, no embedding
ENTITY_KINDS = PEOPLE_ENTITY_KINDS + THING_KINDS
ALL_KINDS = TEXT_KINDS + ENTITY_KINDS

# EntityMatch id types (hri_msgs/IdsMatch style).
MATCH_UNSET, MATCH_PERSON, MATCH_FACE, MATCH_VOICE = 0, 1, 2, 4


@dataclass(frozen=True)
class Place:
    """Where a memory happened: the robot's position in a map frame (metres, radians) and the named
    region it lies in ("" when none); m3_memory.place gives poses and regions."""

    frame_id: str
    x: float
    y: float
    yaw: float = 0.0
    region: str = ""


@dataclass(frozen=True)
class Sighting:
    """An entity observed in one clip (a face seen, a voice heard): its first and last observation there, and
    where the robot was at the last one (None without a pose)."""

    entity_id: str
    clip_index: int
    first_ns: int
    last_ns: int
    place: Place | None = None


@dataclass
class FaceEvidence:
    """One face observation (FaceObservation inside FaceTracks); face_id is the perception id."""

    face_id: str
    track_id: int
    bbox: tuple[float, float, float, float]
    score: float
    stamp_ns: int
    embedding: list[float] = field(default_factory=list)
    crop_jpeg: bytes = b""
    quality: float = 0.0


@dataclass
class VoiceEvidence:
    """One utterance (VoiceSegment); voice_id is the perception id."""

    voice_id: str
    start_ns: int
    end_ns: int
    transcript: str
    confidence: float
    embedding: list[float] = field(default_factory=list)
    segment_id: int = 0

    @property
    def stamp_ns(self) -> int:
        return self.end_ns


@dataclass
class MatchEvidence:
    """Evidence that two perception ids are one human (EntityMatch)."""

    id1: str
    id2: str
    confidence: float
    evidence_count: int
    stamp_ns: int
    id1_type: int = MATCH_UNSET
    id2_type: int = MATCH_UNSET


PEOPLE_LABELS = frozenset({"person"})  # detector classes that are people, not things (faces and voices are)


def label_of(label: str) -> str:
    """A detector class as memory writes it: lower case, single spaces ("Wine  glass" -> "wine glass")."""
    return " ".join(label.lower().split())


@dataclass
class ObjectEvidence:
    """One object in one camera image (ObjectTrack inside ObjectTracks); object_id is perception's track id."""

    object_id: str
    label: str
    confidence: float
    bbox: tuple[float, float, float, float]  # x, y, width, height [px]
    stamp_ns: int
    crop_jpeg: bytes = b""  # the track's most confident crop so far, when it changed with this image


@dataclass
class TextEvidence:
    """Written text read in one keyframe (TextRegion inside TextRegions); region_id is perception's id."""

    region_id: str
    text: str
    confidence: float
    bbox: tuple[float, float, float, float]  # x, y, width, height [px]
    stamp_ns: int


@dataclass(frozen=True)
class LineBefore:
    """The last line heard before a clip: a question asked there may be answered in the clip."""

    speaker: str  # memory id of its speaker (voice_N)
    text: str  # what was said
    end_ns: int  # when it ended (stream clock)


@dataclass
class ClipEvidence:
    """Everything perception reported inside one clip window."""

    clip_index: int
    start_ns: int
    end_ns: int
    faces: list[FaceEvidence] = field(default_factory=list)
    voices: list[VoiceEvidence] = field(default_factory=list)
    matches: list[MatchEvidence] = field(default_factory=list)
    keyframe_jpeg: bytes = b""  # the clip's first frame, stored with it
    keyframes: list[tuple[int, bytes]] = field(default_factory=list)  # (stamp_ns, JPEG) spread over the clip
    # (merged perception voice id, id it joined): revisions made while the clip was open (VoiceRevision);
    # the memory merges what earlier, stored clips made of the two ids when it stores this clip
    voice_merges: list[tuple[str, str]] = field(default_factory=list)
    # the robot's path through the clip (m3_memory.place.poses.PoseSample, stamp order); empty = no pose topic
    path: list = field(default_factory=list)
    objects: list[ObjectEvidence] = field(default_factory=list)  # what perception's detector saw
    texts: list[TextEvidence] = field(default_factory=list)  # written text perception read
    # context, not evidence of this clip: the previous clip's last line, set by the memory as it ingests
    line_before: LineBefore | None = None

    def is_empty(self) -> bool:
        return not (self.faces or self.voices or self.matches or self.objects or self.texts)


@dataclass
class VoiceRevision:
    """Perception's revision of earlier voice assignments (IdentityUpdate, kind VOICE): ids found to be
    one speaker, and utterances given to another voice. Published, never applied silently."""

    stamp_ns: int  # stream time the revision covers up to
    merges: list[tuple[str, str]] = field(default_factory=list)  # (merged id, id it joined), in order
    corrections: list[tuple[int, str, str]] = field(default_factory=list)  # (segment_id, previous, now; "" none)


@dataclass
class MemoryDraft:
    """A text memory a memorizer proposes; entity tags in text use memory entity ids."""

    kind: str
    text: str
    start_ns: int
    end_ns: int
    things: list[str] = field(default_factory=list)  # object/text entity ids it is about, named in words


@dataclass
class TextNode:
    """A stored episodic or semantic memory (embedding kept only in the store and index)."""

    node_id: str
    seq: int
    kind: str
    text: str
    clip_index: int
    start_ns: int
    end_ns: int
    weight: float
    entity_ids: list[str] = field(default_factory=list)
    place: Place | None = None  # where the robot was when it happened; None = no pose recorded
    valid_until_ns: int = 0  # when a newer memory replaced what it states (stream clock); 0 = still valid
    superseded_by: str = ""  # the memory that replaced it; "" = none

    def known_at(self, stamp_ns: int) -> TextNode:
        """The memory as it was known at stamp_ns (0 = now): a replacement that came later is not known then."""
        if self.valid_until_ns and stamp_ns and self.valid_until_ns > stamp_ns:
            return replace(self, valid_until_ns=0, superseded_by="")
        return self


@dataclass
class EntityRecord:
    """A face, voice, person, object or text entity; person_id is the (canonical) person a face/voice
    belongs to; label is an object's class ("cup") or a text's reading, "" for people."""

    entity_id: str
    seq: int
    kind: str
    name: str = ""
    person_id: str = ""
    observation_count: int = 0
    first_clip: int = -1
    last_clip: int = -1
    first_ns: int = 0
    last_ns: int = 0
    crop_score: float = -1.0
    name_votes: dict[str, float] = field(default_factory=dict)  # name -> its mentions' summed weights (0..1 each)
    label: str = ""


@dataclass
class ClipRecord:
    """A stored clip with its memories (the unit search_clip returns)."""

    clip_index: int
    start_ns: int
    end_ns: int
    stored_ns: int
    episodic: list[TextNode] = field(default_factory=list)
    semantic: list[TextNode] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)
    score: float = 0.0
    node_scores: dict[str, float] = field(default_factory=dict)  # memory id -> cosine to the query
    robot_id: str = ""  # the robot that stored the clip (its clip_index counts that robot's clips)
    names: dict[str, str] = field(default_factory=dict)  # search results: id its memories name -> its person's name
    heard: bool = False  # not memorized yet: its episodic memories are the lines heard so far (search/heard.py)

    def started_by(self, stamp_ns: int) -> ClipRecord:
        """The clip as it was known at stamp_ns: only memories that had started by then."""
        return replace(
            self,
            episodic=[n.known_at(stamp_ns) for n in self.episodic if n.start_ns <= stamp_ns],
            semantic=[n.known_at(stamp_ns) for n in self.semantic if n.start_ns <= stamp_ns],
        )
