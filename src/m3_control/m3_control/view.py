"""Is it in view now? Questions about the present answered from what perception sees, not from memory.

Memory holds what was seen (clip lines, issue 23), so "Where did you see the cup?" is a memory question.
"Can you see a cup?", "Is the cat in view?", "What do you see?" ask about now: the answer is in
perception's latest `m3/objects` (ObjectTracks, 2 per second of stream time by default) and `m3/texts`
(TextRegions, read on keyframes), which the control node keeps in a ViewState (control_view.py
subscribes). Pure logic, no rclpy: the node hands in plain sightings.

- An object is in view when its track was seen within `window_s` of the newest image's stamp (a detector
  misses a frame now and then: one image alone would make a cup flicker in and out of view).
- "Now" needs a fresh image: when none arrived within `max_age_s` (wall clock) the answer says it cannot
  tell, and why (perception not running, or its object_backend off), instead of "no".
- Words are matched to detector classes by name (plurals folded, spaces ignored: "cell phones" is
  "cell phone"), by a label's last word ("glass" is "wine glass") and by a few everyday synonyms of COCO's
  names ("phone", "fridge", "couch"), so a user's own ONNX classes match by name too.
- Written text is read on keyframes, not every image: a region read within `text_window_s` of the newest
  keyframe is in view, in reading order.
"""

from __future__ import annotations

import collections
import re
import threading
import time
from dataclasses import dataclass, field

from m3_memory.search.as_of import NS_PER_S

PEOPLE_WORDS = "person people someone somebody anyone anybody human humans man men woman women child children"
# Everyday words for COCO's class names (darknet's coco.names spellings included): word -> labels.
SYNONYMS: dict[str, tuple[str, ...]] = {
    **{w: ("person",) for w in PEOPLE_WORDS.split()},
    "phone": ("cell phone",), "mobile": ("cell phone",), "cellphone": ("cell phone",), "smartphone": ("cell phone",),
    "mug": ("cup",), "fridge": ("refrigerator",), "couch": ("sofa", "couch"), "sofa": ("sofa", "couch"),
    "tv": ("tvmonitor", "tv"), "television": ("tvmonitor", "tv"), "monitor": ("tvmonitor", "tv"),
    "screen": ("tvmonitor", "tv", "laptop"), "table": ("diningtable", "dining table"),
    "plant": ("pottedplant", "potted plant"), "bike": ("bicycle",), "motorcycle": ("motorbike", "motorcycle"),
    "plane": ("aeroplane", "airplane"), "airplane": ("aeroplane", "airplane"), "ball": ("sports ball",),
    "bag": ("handbag", "backpack", "suitcase"), "hairdryer": ("hair drier",), "teddy": ("teddy bear",),
    "kitty": ("cat",), "puppy": ("dog",),
}  # fmt: skip
# Class names that are not a kind of their last word: a "dog" is no hot dog.
NOT_A_KIND_OF = frozenset({"hot dog", "teddy bear"})
TEXT_WORDS = frozenset("text writing words note notes sign signs label labels letters poster message".split())
_NOW = r"(?:\s+(?:now|right now|at the moment|currently|anymore|any more|still))?"
_THING = r"(?:(?:a|an|the|any|some|my|your|our)\s+)?([a-z][a-z '-]{0,40}?)"
_PLACE = r"(?:in view|in sight|visible|in front of you|in the (?:camera|picture|image)|around|here)"
# (pattern, what it asks: "thing" with the thing in group 1, or "all")
QUESTIONS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(rf"^(?:can|do) you(?: currently| still)? see{_NOW}\s+{_THING}{_NOW}(?: {_PLACE})?{_NOW}\??$"), "thing"),
    (re.compile(rf"^(?:is|are) (?:there\s+)?{_THING}(?: still)? {_PLACE}{_NOW}\??$"), "thing"),
    (re.compile(rf"^what (?:do|can) you(?: currently)? see{_NOW}(?: {_PLACE})?{_NOW}\??$"), "all"),
    (re.compile(rf"^what(?:'s| is| are)(?: there)? {_PLACE}{_NOW}\??$"), "all"),
    (re.compile(rf"^who (?:do|can) you see{_NOW}\??$|^(?:who(?:'s| is)) {_PLACE}{_NOW}\??$"), "people"),
    (re.compile(rf"^how many ([a-z][a-z '-]{{0,40}}?) (?:(?:can|do) you(?: currently)? see|are(?: there)?(?= {_PLACE}))"
                rf"{_NOW}(?: {_PLACE})?{_NOW}\??$"), "count"),
)  # fmt: skip


@dataclass(frozen=True)
class ViewQuestion:
    asks: str  # "thing", "count" (how many of it), "all" (what is in view) or "people" (who is)
    thing: str = ""  # the thing asked about, lower case, without article ("cup", "cell phones")


def view_question(instruction: str) -> ViewQuestion | None:
    """The question about what is in view now, or None (a memory question: "did you see", "where is";
    and a person asked for by name, "Is Bob here?": the detector sees people, not who they are)."""
    text = re.sub(r"\s+", " ", instruction.strip()).replace("’", "'")
    text = re.sub(r"^(?:robot|hey|ok|okay|please)[,!]?\s+", "", text, flags=re.IGNORECASE)
    for pattern, asks in QUESTIONS:
        match = pattern.match(text.lower())
        if match:
            thing = (match.group(1) or "").strip() if match.groups() else ""
            if thing and any(c.isupper() for c in text[match.start(1) : match.end(1)]):
                return None
            if asks == "thing" and thing in ("anything", "something", "anything else"):
                return ViewQuestion("all")
            if asks == "thing" and thing in ("anyone", "anybody", "someone", "somebody"):
                return ViewQuestion("people")
            return ViewQuestion(asks, thing)
    return None


@dataclass(frozen=True)
class Sighting:
    track_id: str  # the detector track's id ("object_3") or text region's ("text_2")
    label: str  # the class, or the text read
    confidence: float  # [0..1]
    last_seen_ns: int  # stream clock
    x: float = 0.0  # box left edge [px]: text is read left to right
    y: float = 0.0  # box top edge [px]: and top to bottom


@dataclass
class ViewState:
    """The newest images' objects and keyframes' texts perception published, for what is in view now."""

    window_s: float = 1.0  # an object seen this long before the newest image is still in view [s]
    text_window_s: float = 10.0  # text read this long before the newest keyframe is still in view [s]
    max_age_s: float = 3.0  # no image for this long (wall clock): "now" is unknown [s]
    _images: dict[str, collections.deque] = field(default_factory=dict)  # kind -> (stamp_ns, sightings), oldest first
    _received: dict[str, float] = field(default_factory=dict)  # kind -> when its newest came (time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def objects(self, stamp_ns: int, sightings: list[Sighting], received: float | None = None) -> None:
        """One image's objects (ObjectTracks)."""
        self._update("objects", self.window_s, stamp_ns, sightings, received)

    def texts(self, stamp_ns: int, sightings: list[Sighting], received: float | None = None) -> None:
        """One keyframe's text regions (TextRegions)."""
        self._update("texts", self.text_window_s, stamp_ns, sightings, received)

    def _update(self, kind: str, window_s: float, stamp_ns: int, sightings: list[Sighting], received) -> None:
        with self._lock:
            images = self._images.setdefault(kind, collections.deque())
            if images and stamp_ns < images[-1][0] - window_s * NS_PER_S:
                images.clear()  # the stream went back in time (a recording played again): start over
            images.append((stamp_ns, list(sightings)))
            newest = max(stamp for stamp, _ in images)
            while images[0][0] < newest - window_s * NS_PER_S:
                images.popleft()
            self._received[kind] = time.monotonic() if received is None else received

    def in_view(self, kind: str, now: float | None = None) -> list[Sighting] | str:
        """What is in view now, or why that is unknown. Objects: per class, the image of the window that
        shows most of them (a tracker that lost and found a person gives it a new id: counting ids over
        the window would count one person twice), most confident first. Texts: each region's newest
        reading, top to bottom, left to right."""
        now = time.monotonic() if now is None else now
        with self._lock:
            received = self._received.get(kind)
            if received is None:
                backend = "object_backend yolov3_tiny or onnx" if kind == "objects" else "text_backend on"
                return f"no {kind} have come from perception yet (is it running, with {backend}?)"
            age = now - received
            limit = self.max_age_s if kind == "objects" else max(self.max_age_s, self.text_window_s)
            if age > limit:
                return (
                    f"nothing has come from perception's {kind} for {age:.0f} s (has the camera or perception stopped?)"
                )
            images = list(self._images[kind])
        if kind == "texts":
            newest = {s.track_id: s for _, seen in images for s in seen}
            return sorted(newest.values(), key=lambda s: (s.y, s.x))
        most: dict[str, list[Sighting]] = {}
        for _, seen in images:  # oldest first: a newer image showing as many wins
            for label in {s.label for s in seen}:
                group = [s for s in seen if s.label == label]
                if len(group) >= len(most.get(label, ())):
                    most[label] = group
        return sorted((s for group in most.values() for s in group), key=lambda s: -s.confidence)


def _singular(word: str) -> str:
    for plural, single in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("sses", "ss"), ("xes", "x")):
        if word.endswith(plural):
            return word[: -len(plural)] + single
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _key(text: str) -> str:
    return "".join(_singular(w) for w in text.lower().replace("-", " ").split())


def matches(thing: str, label: str) -> bool:
    """Whether a detector class names the thing asked about (see the module docstring)."""
    words = [_singular(w) for w in thing.lower().replace("-", " ").split()]
    if not words:
        return False
    label_key, label_words = _key(label), [_singular(w) for w in label.lower().split()]
    if _key(thing) == label_key:
        return True
    if len(words) == 1 and label_words and words[-1] == label_words[-1] and label.lower() not in NOT_A_KIND_OF:
        return True  # "glass" is a "wine glass", a user's "coffee mug" a "mug"
    return any(_key(s) == label_key for s in SYNONYMS.get(words[-1], ()))


def _article(label: str) -> str:
    return "an" if label[:1] in ("a", "e", "i", "o", "u") else "a"


def _plural(label: str) -> str:
    if label == "person":
        return "people"
    return label + ("es" if label.endswith(("s", "x", "ch", "sh")) else "s")


def _counted(sightings: list[Sighting]) -> str:
    """ "a cup", "2 cups and a person" (per class, most confident first)."""
    counts: dict[str, int] = {}
    for s in sightings:
        counts[s.label] = counts.get(s.label, 0) + 1
    parts = [f"{n} {_plural(label)}" if n > 1 else f"{_article(label)} {label}" for label, n in counts.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _read(texts: list[Sighting]) -> str:
    """The texts in reading order, quoted; at most 4 (a page of text is not an answer)."""
    return "; ".join(f'"{t.label}"' for t in texts[:4])


def answer_now(question: ViewQuestion, state: ViewState, now: float | None = None) -> str:
    """The answer to a question about what is in view now (from state; see the module docstring)."""
    thing = question.thing
    if question.asks == "thing" and set(thing.split()) & TEXT_WORDS:
        texts = state.in_view("texts", now)
        if isinstance(texts, str):
            return f"I cannot tell whether there is written text in view now: {texts}."
        return f"Yes: I can read {_read(texts)}." if texts else f"No: I can read no {thing} now."
    objects = state.in_view("objects", now)
    if isinstance(objects, str):
        return f"I cannot tell what is in view now: {objects}."
    if question.asks == "all":
        said = f"I see {_counted(objects)}." if objects else "I see nothing I can name."
        texts = state.in_view("texts", now)
        return said + (f" I can read {_read(texts)}." if not isinstance(texts, str) and texts else "")
    if question.asks == "count":
        found = [s for s in objects if matches(thing, s.label)]
        return f"I see {_counted(found)} now." if found else f"I see no {thing} now."
    if question.asks == "people" or thing in PEOPLE_WORDS.split():
        people = [s for s in objects if s.label == "person"]
        return f"Yes: I see {_counted(people)} now." if people else "No: I see nobody now."
    found = [s for s in objects if matches(thing, s.label)]
    if found:
        return f"Yes: I see {_counted(found)} now."
    others = f" I see {_counted(objects)}." if objects else ""
    return f"No: I do not see any {thing} now.{others}"
