"""A question's relative time phrase ("this morning", "an hour ago", "on Monday") as a window on the
stream clock.

Why: memory is searched by time as well as by meaning, so "what did Alice say this morning?" must
narrow the search to this morning's clips, on the clock the clips carry (integer nanoseconds since
the epoch, UTC). Day boundaries are the asker's local midnights, and the stream knows only a fixed UTC
offset, so plain integer arithmetic does it (no datetime or zoneinfo) and nanoseconds stay exact.

Why the first phrase in the text wins, even a future one ("tomorrow" gives None): a question names
one time; when a later phrase would give a window, the first usually qualifies it ("yesterday, an
hour after lunch") and guessing between them does more harm than searching without a window.
Day and part-of-day windows end one nanosecond before their boundary, so adjacent days never share an
instant; every window is clipped to end at the question time at the latest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

NS_PER_S = 1_000_000_000
_MIN = 60 * NS_PER_S
_HOUR = 60 * _MIN
_DAY = 24 * _HOUR
_EPOCH_WEEKDAY = 3  # 1970-01-01 was a Thursday (Monday = 0)


@dataclass(frozen=True)
class TimeWindow:
    """A window on the stream clock; both ends inclusive, the end never after the question time."""

    start_ns: int
    end_ns: int
    phrase: str


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WD = "|".join(_WEEKDAYS)
_SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_NUMBERS = {w: i for i, w in enumerate(_SMALL)} | {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60}
_BY_LENGTH = sorted(_NUMBERS, key=len, reverse=True)
_ONES = "|".join(_SMALL[1:10])
_QTY = (
    rf"(?:\d+(?:\.\d+)?|(?:twenty|thirty|forty|fifty)(?:[-\s](?:{_ONES}))?|{'|'.join(_BY_LENGTH)}"
    r"|a\s+few|a\s+couple(?:\s+of)?|couple(?:\s+of)?|few|several|half(?:\s+an?)?|an?)"
)
_UNIT = r"(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|wks?)"
_UNIT_NS = {"s": NS_PER_S, "m": _MIN, "h": _HOUR, "d": _DAY, "w": 7 * _DAY}
_PART = r"(?:morning|afternoon|evening|night)"
# Local hours of each part of a day; night runs into the next morning.
_PARTS = {"day": (0, 24), "morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 29)}

_DAY_RE = re.compile(
    rf"""\b(?:
      (?:earlier\s+)?(?:(?P<today>today)|this\s+(?P<this>morning|afternoon|evening)|(?P<tonight>tonight))
    | (?P<dby>the\s+day\s+before\s+yesterday)(?:\s+(?P<p1>{_PART}))?
    | (?P<yest>yesterday)(?:\s+(?P<p2>{_PART}))?
    | last\s+(?P<lastnight>night)
    | (?:(?:on|last|this\s+past|past|(?P<thiswd>this))\s+)?(?P<wd>{_WD})(?:\s+(?P<p3>{_PART}))?
    )\b""",
    re.I | re.X,
)
# Kinds in priority order: at one position the longest match wins, then the earlier kind.
_PATTERNS = [
    (
        "future",
        rf"\b(?:tomorrow|next\s+(?:week|month|year|weekend|{_WD})|in\s+{_QTY}\s*{_UNIT}"
        rf"|(?:in|within|over|during)\s+the\s+(?:next|coming)\s+(?:{_QTY}\s*)?{_UNIT}"
        rf"|later\s+(?:today|tonight|this\s+{_PART}))\b",
    ),
    ("this_week", r"\b(?:earlier\s+)?this\s+week\b"),
    ("last_week", r"\blast\s+week\b"),
    (
        "within",  # "at the last minute" is an idiom, not a window
        rf"(?<!\bat\s)(?<!\bat\sthe\s)\b(?:(?:in|over|during|within|for)\s+)?(?:the\s+)?(?:last|past)\s+"
        rf"(?:(?P<q>{_QTY})\s*)?(?P<u>{_UNIT})\b",
    ),
    ("ago", rf"\b(?P<q>{_QTY})\s*(?P<u>{_UNIT})(?P<half>\s+and\s+a\s+half)?(?:\s+or\s+so)?\s+ago\b"),
    ("moment", r"\bjust\s+now\b|\b(?:just\s+)?(?:a\s+(?:few\s+)?moments?|moments)\s+ago\b"),
    ("recently", r"\brecently\b"),
    ("earlier", r"\bearlier\b"),
]
_COMPILED = [(kind, re.compile(rx, re.I)) for kind, rx in _PATTERNS]
_HOUR_WORDS = "|".join(sorted(_SMALL[1:13], key=len, reverse=True))
_CLOCK_RE = re.compile(
    rf"""\b(?:at\s+(?:about\s+|around\s+)?|around\s+|about\s+)
    (?:(?P<noon>noon|midday|midnight)
     | (?P<h>\d{{1,2}}|{_HOUR_WORDS})(?::(?P<m>\d{{2}}))?
       (?:\s*(?P<ampm>[ap])\.?m\b\.?|\s*(?P<oclock>o['’]?clock)\b
        |\s+in\s+the\s+(?P<inpart>morning|afternoon|evening)\b|\s+at\s+(?P<atnight>night)\b)?
    )(?![\w:])""",
    re.I | re.X,
)
# A bare hour ("at 8") is a time only next to a day ("this morning at 8") and not followed by a word
# that makes it something else ("at 10 Downing Street", "about 3 hours ago").
_BARE_FOLLOW_RE = re.compile(rf"\s*(?:[^\w\s]|$)|\s+(?:this|today|tonight|yesterday|last|on|{_WD})\b", re.I)
_GAP_RE = re.compile(r"\s*,?\s*")


def _qty(text: str | None) -> Fraction:
    """The amount a quantity phrase says: digits, number words, "a", "a few" (3), "a couple" (2)."""
    if not text:
        return Fraction(1)
    t = " ".join(text.lower().replace("-", " ").split())
    if t[0].isdigit():
        return Fraction(t)
    t = t.removeprefix("a ").removesuffix(" of")
    if t.startswith("half"):
        return Fraction(1, 2)
    if t in ("a", "an"):
        return Fraction(1)
    if t in ("few", "several"):
        return Fraction(3)
    if t == "couple":
        return Fraction(2)
    return Fraction(sum(_NUMBERS[w] for w in t.split()))


def _day(m: re.Match[str], weekday: int) -> tuple[int, str]:
    """(days before today, part of the day) a day phrase names."""
    g = m.groupdict()
    if g["today"]:
        return 0, "day"
    if g["this"] or g["tonight"]:
        return 0, (g["this"] or "evening").lower()
    if g["dby"]:
        return -2, (g["p1"] or "day").lower()
    if g["yest"]:
        return -1, (g["p2"] or "day").lower()
    if g["lastnight"]:
        return -1, "night"
    wd = _WEEKDAYS.index(g["wd"].lower())
    back = 0 if g["thiswd"] and wd == weekday else (weekday - wd - 1) % 7 + 1  # else strictly before today
    return -back, (g["p3"] or "day").lower()


def _valid_clock(m: re.Match[str]) -> bool:
    if m["noon"]:
        return True
    h = int(m["h"]) if m["h"].isdigit() else _NUMBERS[m["h"].lower()]
    if m["m"] is not None and int(m["m"]) > 59:
        return False
    return 1 <= h <= 12 if m["ampm"] else h <= 23


def _is_bare(m: re.Match[str]) -> bool:
    return not any(m[g] for g in ("noon", "m", "ampm", "oclock", "inpart", "atnight"))


def _clock_time(m: re.Match[str], part: str) -> tuple[int, int]:
    """(days after the named day, ns after its midnight) of a clock time; a bare hour reads as the
    part of the day suggests, or with no part 7-12 as morning and 1-6 as afternoon."""
    part = (m["inpart"] or ("night" if m["atnight"] else part)).lower()
    mi = int(m["m"] or 0)
    if m["noon"]:
        hour = 0 if m["noon"].lower() == "midnight" else 12
    else:
        h_text = m["h"]
        h = int(h_text) if h_text.isdigit() else _NUMBERS[h_text.lower()]
        if m["ampm"]:
            hour = h % 12 + (12 if m["ampm"].lower() == "p" else 0)
        elif h == 0 or h >= 13 or h_text.startswith("0"):
            hour = h
        elif part == "morning":
            hour = h
        elif part == "night":
            hour = h % 12 if h <= 4 or h == 12 else h + 12
        elif part in ("afternoon", "evening"):
            hour = h % 12 + 12
        else:
            hour = h + 12 if h <= 6 else h
    shift = 1 if part == "night" and hour < 12 else 0
    return shift, hour * _HOUR + mi * _MIN


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    rank: int
    kind: str
    match: re.Match[str]  # for a clock time, the clock
    day: re.Match[str] | None = None  # for a clock time, the day next to it


def _candidates(question: str) -> list[_Found]:
    found = [
        _Found(m.start(), m.end(), rank, kind, m)
        for rank, (kind, rx) in enumerate(_COMPILED)
        for m in rx.finditer(question)
    ]
    days = list(_DAY_RE.finditer(question))
    found += [_Found(m.start(), m.end(), len(_COMPILED), "day", m) for m in days]
    for c in _CLOCK_RE.finditer(question):
        if not _valid_clock(c) or (_is_bare(c) and not _BARE_FOLLOW_RE.match(question, c.end())):
            continue
        merged = [
            _Found(min(d.start(), c.start()), max(d.end(), c.end()), -1, "clock", c, d)
            for d in days
            if (d.end() <= c.start() and _GAP_RE.fullmatch(question, d.end(), c.start()))
            or (c.end() <= d.start() and _GAP_RE.fullmatch(question, c.end(), d.start()))
        ]
        if merged:
            found.append(merged[0])
        elif not _is_bare(c):
            found.append(_Found(c.start(), c.end(), -1, "clock", c))
    return found


def resolve_times(question: str, asked_ns: int, utc_offset_s: int = 0) -> TimeWindow | None:
    """The time window a question's relative time phrase names, or None when it names none."""
    found = _candidates(question)
    if not found:
        return None
    first = min(found, key=lambda f: (f.start, -f.end, f.rank))
    off_ns = utc_offset_s * NS_PER_S
    local_day = (asked_ns + off_ns) // _DAY
    midnight = local_day * _DAY - off_ns
    weekday = (local_day + _EPOCH_WEEKDAY) % 7
    phrase = question[first.start : first.end]

    def window(start: int, end: int) -> TimeWindow | None:
        return None if start > asked_ns else TimeWindow(start, min(end, asked_ns), phrase)

    m = first.match
    if first.kind == "clock":
        days_back, part = _day(first.day, weekday) if first.day else (0, "day")
        shift, since_midnight = _clock_time(m, part)
        t = midnight + (days_back + shift) * _DAY + since_midnight
        return None if t > asked_ns else window(t - 15 * _MIN, t + 15 * _MIN)
    if first.kind == "day":
        days_back, part = _day(m, weekday)
        base = midnight + days_back * _DAY
        first_h, last_h = _PARTS[part]
        return window(base + first_h * _HOUR, base + last_h * _HOUR - 1)
    if first.kind in ("within", "ago"):
        qty = _qty(m["q"]) + (Fraction(1, 2) if first.kind == "ago" and m["half"] else 0)
        span = int(qty * _UNIT_NS[m["u"][0].lower()])
        if first.kind == "within":
            return window(asked_ns - span, asked_ns)
        half_width = max(span // 4, 30 * NS_PER_S)
        return window(asked_ns - span - half_width, asked_ns - span + half_width)
    spans = {"this_week": 7 * _DAY, "moment": 2 * _MIN, "recently": 30 * _MIN}
    if first.kind in spans:
        return window(asked_ns - spans[first.kind], asked_ns)
    if first.kind == "last_week":
        return window(midnight - 7 * _DAY, midnight - 1)
    if first.kind == "earlier":
        return window(midnight, asked_ns)
    return None  # a future phrase


# Phrases that place a question's events in the past by themselves; any other time phrase ("on Sunday",
# "tonight", "at six") may instead be part of what is asked ("Whom does Linda call on Sunday?", "What is
# Bob doing tonight?"), so it narrows the search only in a question about the past.
_PAST_PHRASE = re.compile(r"\b(ago|yesterday|last|earlier|recently|just now|past|moments?)\b", re.IGNORECASE)
_PAST_QUESTION = re.compile(
    r"\b(did|was|were|had|said|told|saw|seen|heard|met|left|put|came|went|brought|took|gave|asked|happened)\b",
    re.IGNORECASE,
)
_HABIT = re.compile(r"\b(every|each|usually|always|on (?:mon|tues|wednes|thurs|fri|satur|sun)days)\b", re.IGNORECASE)


def search_window(question: str, asked_ns: int, before_stamp_ns: int, utc_offset_s: int = 0) -> tuple[int, int, str]:
    """(after_ns, before_stamp_ns, phrase) for a question's searches: the window of its relative time when
    that time says when something happened, inside the goal's as-of limit (before_stamp_ns, 0 = none), and
    the phrase that gave it; else (0, before_stamp_ns, ""): no time phrase, no known question time, or a
    time that is part of what is asked."""
    window = resolve_times(question, asked_ns, utc_offset_s) if asked_ns > 0 else None
    if window is None or _HABIT.search(question):
        return 0, before_stamp_ns, ""
    if not _PAST_PHRASE.search(window.phrase) and not _PAST_QUESTION.search(question):
        return 0, before_stamp_ns, ""
    end = window.end_ns if before_stamp_ns <= 0 else min(window.end_ns, before_stamp_ns)
    return max(window.start_ns, 1), end, window.phrase


def without_phrase(query: str, phrase: str) -> str:
    """A search query without the time phrase its window already stands for: "an hour ago" would only pull
    the query's meaning away from what was said then. The query as it was when nothing else is left."""
    if not phrase:
        return query
    rest = " ".join(re.sub(re.escape(phrase), " ", query, flags=re.IGNORECASE).split())
    return rest if re.search(r"\w", rest) else query
