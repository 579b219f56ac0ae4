"""relative_times turns a question's relative time phrase into a window on the stream clock. Expected
windows are computed here with datetime (not with the module's integer arithmetic), so a slip in the
module's day or offset sums shows. Questions are asked on Tuesday 2026-03-10 at 14:20 UTC unless a case
says otherwise. Day and part-of-day windows end one nanosecond before their boundary (inclusive ends
that do not touch the next day); windows that reach the question end at the question time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from m3_control.relative_times import NS_PER_S, TimeWindow, resolve_times

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ASKED = datetime(2026, 3, 10, 14, 20, tzinfo=UTC)  # a Tuesday
CET = 3600  # utc_offset_s +01:00
EST = -18000  # utc_offset_s -05:00


def ns(dt: datetime) -> int:
    return (dt - EPOCH) // timedelta(microseconds=1) * 1000


def at(*args: int, off: int = 0) -> datetime:
    """A wall-clock time in the zone utc_offset_s=off."""
    return datetime(*args, tzinfo=timezone(timedelta(seconds=off)))


def before(dt: datetime) -> int:
    """The last nanosecond before dt: the inclusive end of a window that stops at dt."""
    return ns(dt) - 1


def utc(h: int, mi: int = 0, s: int = 0, d: int = 10) -> datetime:
    return at(2026, 3, d, h, mi, s)


def ask(question: str, off: int = 0, asked: datetime = ASKED) -> tuple[int, int] | None:
    window = resolve_times(question, ns(asked), off)
    return None if window is None else (window.start_ns, window.end_ns)


# ---------------------------------------------------------------------------------------------------
# Held-out phrasings: written before the parser and left unchanged after it.

HELD_OUT_WINDOWS = [
    # held-out phrasing
    ("Who did I talk to Yesterday Afternoon?", 0, ns(utc(12, d=9)), before(utc(18, d=9))),
    # held-out phrasing
    ("Where did I leave my keys 10 minutes ago?", 0, ns(utc(14, 7, 30)), ns(utc(14, 12, 30))),
    # held-out phrasing
    ("What happened over the past 3 hours?", 0, ns(utc(11, 20)), ns(ASKED)),
    # held-out phrasing
    ("Did anyone call earlier this afternoon?", 0, ns(utc(12)), ns(ASKED)),
    # held-out phrasing
    ("Who was in the kitchen around 11:45?", 0, ns(utc(11, 30)), ns(utc(12))),
    # held-out phrasing
    ("What did Carol say at 9am?", 0, ns(utc(8, 45)), ns(utc(9, 15))),
    # held-out phrasing
    ("what was said a couple hours ago", 0, ns(utc(11, 50)), ns(utc(12, 50))),
    # held-out phrasing
    ("Who visited me on Sunday?", 0, ns(utc(0, d=8)), before(utc(0, d=9))),
    # held-out phrasing
    ("What did we eat last Friday evening?", 0, ns(utc(18, d=6)), before(utc(0, d=7))),
    # held-out phrasing
    ("What did Dan say just a moment ago?", 0, ns(utc(14, 18)), ns(ASKED)),
    # held-out phrasing
    ("Anything new in the past day?", 0, ns(utc(14, 20, d=9)), ns(ASKED)),
    # held-out phrasing
    ("Who rang the bell 2 hrs ago?", 0, ns(utc(11, 50)), ns(utc(12, 50))),
    # held-out phrasing
    ("What did Eve say 45 seconds ago?", 0, ns(utc(14, 18, 45)), ns(utc(14, 19, 45))),
    # held-out phrasing
    ("What happened over the last few minutes?", 0, ns(utc(14, 17)), ns(ASKED)),
    # held-out phrasing: 09:20 local
    ("What did Alice say earlier this morning?", EST, ns(at(2026, 3, 10, 5, off=EST)), ns(ASKED)),
    # held-out phrasing: 15:20 local
    (
        "Who came by yesterday evening?",
        CET,
        ns(at(2026, 3, 9, 18, off=CET)),
        before(at(2026, 3, 10, 0, off=CET)),
    ),
    # held-out phrasing
    ("WHAT DID FRANK SAY YESTERDAY?", 0, ns(utc(0, d=9)), before(utc(0))),
    # held-out phrasing: 09:20 local, so last night is over
    (
        "what did the kids do last night?",
        EST,
        ns(at(2026, 3, 9, 18, off=EST)),
        before(at(2026, 3, 10, 5, off=EST)),
    ),
    # held-out phrasing
    ("Tell me what Grace said half an hour ago.", 0, ns(utc(13, 42, 30)), ns(utc(13, 57, 30))),
    # held-out phrasing
    ("What did Bob say this morning around 8?", 0, ns(utc(7, 45)), ns(utc(8, 15))),
    # held-out phrasing
    ("what did I hear at 3 pm yesterday", 0, ns(utc(14, 45, d=9)), ns(utc(15, 15, d=9))),
    # held-out phrasing
    ("What did Heidi say an hour or so ago?", CET, ns(utc(13, 5)), ns(utc(13, 35))),
]

HELD_OUT_NONE = [
    "Hold on a second, who is that?",  # held-out phrasing
    "What's the plan for next Monday?",  # held-out phrasing
    "Is the Mondays meeting still on?",  # held-out phrasing
    "Good morning! Who is at the door?",  # held-out phrasing
    "I have 3 apples, where did I put them?",  # held-out phrasing
    "Who is coming over tonight?",  # held-out phrasing: asked at 14:20, the evening has not begun
    "Remind me in ten minutes what Bob said.",  # held-out phrasing: a future phrase comes first
    "What will we do tomorrow morning?",  # held-out phrasing
    "Where is the meeting at the office?",  # held-out phrasing
    "Who lives at 10 Downing Street?",  # held-out phrasing
]


@pytest.mark.parametrize(("question", "off", "start", "end"), HELD_OUT_WINDOWS)
def test_held_out_phrasings_give_their_windows(question, off, start, end):
    assert ask(question, off) == (start, end)


@pytest.mark.parametrize("question", HELD_OUT_NONE)
def test_held_out_phrasings_that_name_no_past_window(question):
    assert resolve_times(question, ns(ASKED)) is None


# ---------------------------------------------------------------------------------------------------
# Phrasings from the brief, and edges.

WINDOWS = [
    ("What did Alice say this morning?", 0, ns(utc(5)), before(utc(12))),
    ("Where was the cup an hour ago?", 0, ns(utc(13, 5)), ns(utc(13, 35))),
    ("Who came yesterday?", 0, ns(utc(0, d=9)), before(utc(0))),
    ("What happened today?", 0, ns(utc(0)), ns(ASKED)),
    ("Who phoned this afternoon?", 0, ns(utc(12)), ns(ASKED)),
    ("Who was here last night?", 0, ns(utc(18, d=9)), before(utc(5))),
    ("What did Bob do yesterday morning?", 0, ns(utc(5, d=9)), before(utc(12, d=9))),
    ("What did Bob cook yesterday evening?", 0, ns(utc(18, d=9)), before(utc(0))),
    ("Who visited the day before yesterday?", 0, ns(utc(0, d=8)), before(utc(0, d=9))),
    ("What was on the table three hours ago?", 0, ns(utc(10, 35)), ns(utc(12, 5))),
    ("Who left a few minutes ago?", 0, ns(utc(14, 16, 15)), ns(utc(14, 17, 45))),
    ("Where was Bob a couple of hours ago?", 0, ns(utc(11, 50)), ns(utc(12, 50))),
    ("What did you hear a minute ago?", 0, ns(utc(14, 18, 30)), ns(utc(14, 19, 30))),
    ("Who came 2 days ago?", 0, ns(utc(2, 20, d=8)), ns(utc(2, 20, d=9))),
    ("What did Alice say twelve minutes ago?", 0, ns(utc(14, 5)), ns(utc(14, 11))),
    ("What fell an hour and a half ago?", 0, ns(utc(12, 27, 30)), ns(utc(13, 12, 30))),
    ("What did I say a second ago?", 0, ns(utc(14, 19, 29)), ns(ASKED)),  # clipped at the question
    ("Who talked in the last 10 minutes?", 0, ns(utc(14, 10)), ns(ASKED)),
    ("Who came in the last hour?", 0, ns(utc(13, 20)), ns(ASKED)),
    ("What happened in the past 2 days?", 0, ns(utc(14, 20, d=8)), ns(ASKED)),
    ("Did anyone come by recently?", 0, ns(utc(13, 50)), ns(ASKED)),
    ("What did Alice say just now?", 0, ns(utc(14, 18)), ns(ASKED)),
    ("Where did you see the cup earlier?", 0, ns(utc(0)), ns(ASKED)),
    ("Who came earlier today?", 0, ns(utc(0)), ns(ASKED)),
    ("Who visited last week?", 0, ns(utc(0, d=3)), before(utc(0))),
    ("Who visited this week?", 0, ns(utc(14, 20, d=3)), ns(ASKED)),
    ("What did Carol say on Monday?", 0, ns(utc(0, d=9)), before(utc(0))),
    ("What did Carol say last Tuesday?", 0, ns(utc(0, d=3)), before(utc(0, d=4))),  # today is Tuesday
    ("What did Carol say on Monday morning?", 0, ns(utc(5, d=9)), before(utc(12, d=9))),
    ("Who knocked at 1 pm?", 0, ns(utc(12, 45)), ns(utc(13, 15))),
    ("Who knocked at 13:30?", 0, ns(utc(13, 15)), ns(utc(13, 45))),
    ("Who knocked around 9 am?", 0, ns(utc(8, 45)), ns(utc(9, 15))),
    ("What did Dan say this morning at 8?", 0, ns(utc(7, 45)), ns(utc(8, 15))),
    ("What did Dan say at 2:10 pm?", 0, ns(utc(13, 55)), ns(ASKED)),  # clipped at the question
    ("What did Dan say yesterday at noon?", 0, ns(utc(11, 45, d=9)), ns(utc(12, 15, d=9))),
    ("What did Dan say last night at 11?", 0, ns(utc(22, 45, d=9)), ns(utc(23, 15, d=9))),
    ("What did Dan say last night at 2 am?", 0, ns(utc(1, 45)), ns(utc(2, 15))),
    ("Who was at the door at midnight?", 0, ns(utc(23, 45, d=9)), ns(utc(0, 15))),
    ("What did Eve say at 8 in the morning?", 0, ns(utc(7, 45)), ns(utc(8, 15))),
    ("What did Eve say this Tuesday?", 0, ns(utc(0)), ns(ASKED)),  # today is Tuesday
    ("What did Eve say this Monday?", 0, ns(utc(0, d=9)), before(utc(0))),
    ("Did Eve laugh at one point yesterday?", 0, ns(utc(0, d=9)), before(utc(0))),  # "one point" is no clock
    ("What did Eve say around nine this morning?", 0, ns(utc(8, 45)), ns(utc(9, 15))),
    # The first phrase in the text wins.
    ("Did Alice come yesterday or today?", 0, ns(utc(0, d=9)), before(utc(0))),
    ("What did Bob say today, an hour ago?", 0, ns(utc(0)), ns(ASKED)),
    # utc_offset_s: day boundaries are local midnights.
    ("What happened today?", CET, ns(at(2026, 3, 10, 0, off=CET)), ns(ASKED)),
    ("Who came yesterday?", EST, ns(at(2026, 3, 9, 0, off=EST)), before(at(2026, 3, 10, 0, off=EST))),
    ("What did Alice say on Monday?", CET, ns(at(2026, 3, 9, 0, off=CET)), before(at(2026, 3, 10, 0, off=CET))),
    ("What did Alice say at 3 pm?", CET, ns(at(2026, 3, 10, 14, 45, off=CET)), ns(at(2026, 3, 10, 15, 15, off=CET))),
    ("Where was the cup an hour ago?", EST, ns(utc(13, 5)), ns(utc(13, 35))),  # offsets do not move "ago"
]

NONE = [
    ("Wait a minute, who said that?", 0),
    ("What will Alice do tomorrow?", 0),
    ("Who is coming next week?", 0),
    ("Good morning, robot.", 0),
    ("What is 5 plus 7?", 0),
    ("Is the Mondayish mood over?", 0),
    ("What did Alice say this evening?", 0),  # 14:20: the evening has not begun
    ("Who knocked at 3 pm?", 0),  # after the question
    ("Who knocked at 15:30?", 0),
    ("What did Alice say this afternoon?", EST),  # 09:20 local
    ("Who cancelled at the last minute?", 0),
    ("Tomorrow, tell me what Alice said yesterday.", 0),  # a future phrase first
    ("What does the clock at 3 show?", 0),  # a bare hour with no day is no time
]


@pytest.mark.parametrize(("question", "off", "start", "end"), WINDOWS)
def test_windows(question, off, start, end):
    assert ask(question, off) == (start, end)


@pytest.mark.parametrize(("question", "off"), NONE)
def test_no_past_window(question, off):
    assert ask(question, off) is None


def test_phrase_is_the_words_as_written():
    window = resolve_times("So what did Alice say This Morning, then?", ns(ASKED))
    assert window == TimeWindow(ns(utc(5)), before(utc(12)), "This Morning")
    assert resolve_times("Who came the day before yesterday?", ns(ASKED)).phrase == "the day before yesterday"
    assert resolve_times("Where was it about an hour ago?", ns(ASKED)).phrase == "an hour ago"
    assert resolve_times("What did Dan say at 3 pm yesterday?", ns(ASKED)).phrase == "at 3 pm yesterday"


def test_parts_of_the_day_clip_at_the_question():
    evening = at(2026, 3, 10, 20, 0)
    assert ask("What did Alice say this evening?", asked=evening) == (ns(utc(18)), ns(evening))
    assert ask("Who came tonight?", asked=at(2026, 3, 10, 21, 30)) == (ns(utc(18)), ns(utc(21, 30)))
    early = at(2026, 3, 10, 3, 0)
    assert ask("What did Alice say this morning?", asked=early) is None
    assert ask("Who was here last night?", asked=early) == (ns(utc(18, d=9)), ns(early))


def test_weekdays_follow_the_local_day():
    """02:00 UTC on Tuesday is 21:00 on Monday at -05:00, so "on Monday" is the Monday before."""
    asked = at(2026, 3, 10, 2, 0)
    monday_before = at(2026, 3, 2, 0, off=EST)
    assert ask("What did Bob say on Monday?", EST, asked) == (ns(monday_before), before(monday_before + timedelta(1)))
    assert ask("What did Bob say on Monday?", 0, asked) == (ns(utc(0, d=9)), before(utc(0)))


def test_windows_never_end_after_the_question():
    for question, off, _, _ in HELD_OUT_WINDOWS + WINDOWS:
        window = resolve_times(question, ns(ASKED), off)
        assert window.start_ns <= window.end_ns <= ns(ASKED), question
    assert NS_PER_S == 1_000_000_000
