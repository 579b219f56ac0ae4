"""Pure logic without models: name and fact extraction of the rules memorizer, clip windows."""

from __future__ import annotations

import pytest
from m3mem_evidence import S, face, match, voice

from m3_memory.clip_window import ClipWindows
from m3_memory.graph.records import ClipEvidence
from m3_memory.memorize.rules import RulesMemorizer, names_in, self_facts, vocatives_in
from m3_runtime.stamps import StampRejected


@pytest.mark.parametrize(
    ("transcript", "own", "others"),
    [
        ("I'm Alice.", ["Alice"], []),
        ("hi i'm alice", ["Alice"], []),
        ("hello everyone my name is carol and I like tea", ["Carol"], []),
        ("call me Dave please", ["Dave"], []),
        ("this is Bob, he works here", [], ["Bob"]),
        ("thanks, Carol", [], ["Carol"]),
        ("thank you very much", [], []),
        ("i'm tired", [], []),
        ("I'm going home", [], []),
        ("hi there", [], []),
    ],
)
def test_names_in(transcript, own, others):
    assert names_in(transcript) == (own, others)


@pytest.mark.parametrize(
    ("transcript", "facts"),
    [
        ("I like green tea", ["<voice_1> likes green tea."]),
        ("I put the keys in the drawer.", ["<voice_1> put the keys in the drawer."]),
        ("I usually drink coffee with my breakfast", ["<voice_1> usually drinks coffee with their breakfast."]),
        ("my favourite colour is blue", ["The favourite colour of <voice_1> is blue."]),
        ("I am allergic to peanuts", ["<voice_1> is allergic to peanuts."]),
        ("I walk my dog before school.", ["<voice_1> walks their dog before school."]),  # any verb, and "my"
        ("I cycle from the other side of the river.", ["<voice_1> cycles from the other side of the river."]),
        ("I teach maths to class seven.", ["<voice_1> teaches maths to class seven."]),
        ("I carry my own cup.", ["<voice_1> carries their own cup."]),
        ("I came by train today.", ["<voice_1> came by train today."]),  # a past stays a past
        ("I just moved here from Lyon.", ["<voice_1> just moved here from Lyon."]),
        ("I totally agree with my sister.", ["<voice_1> totally agrees with their sister."]),
        ("do I like tea?", []),
        ("I think so", []),
        ("the weather is nice", []),
    ],
)
def test_self_facts(transcript, facts):
    assert self_facts(transcript, "<voice_1>") == facts


def test_rules_memorizer_is_deterministic_and_tags_memory_ids():
    clip = ClipEvidence(
        0, 0, 30 * S,
        faces=[face("face_7", 2.0), face("face_8", 1.0)],
        voices=[voice("voice_3", 3, 4, "I'm Alice. Thanks, Bob"), voice("voice_3", 5, 6, "")],
        matches=[match("face_7", "voice_3", 5)],
    )  # fmt: skip
    ids = {"face_7": "face_1", "face_8": "face_2", "voice_3": "voice_1"}
    out = RulesMemorizer().memorize(clip, ids, lambda e: None)
    assert [d.text for d in out.drafts] == [
        "<face_2> is seen.",
        "<face_1> is seen.",
        "Equivalence: <face_1>, <voice_1>",
        '<voice_1> says: "I\'m Alice. Thanks, Bob"',
        "<voice_1> is called Alice.",
        "<face_2> is called Bob.",
    ]
    assert out.names == [("voice_1", "Alice"), ("face_2", "Bob")]
    assert out.equivalences == [("face_1", "voice_1", 0.9, 3)]
    assert [d.text for d in RulesMemorizer().memorize(clip, ids, lambda e: None).drafts] == [d.text for d in out.drafts]


def test_addressing_is_not_guessed_with_two_listeners():
    clip = ClipEvidence(
        0, 0, 30 * S,
        faces=[face("face_1", 1.0), face("face_2", 1.0), face("face_3", 1.0)],
        voices=[voice("voice_1", 3, 4, "thanks, Bob")],
        matches=[match("face_1", "voice_1", 5)],
    )  # fmt: skip
    ids = {p: p for p in ("face_1", "face_2", "face_3", "voice_1")}
    out = RulesMemorizer().memorize(clip, ids, lambda e: None)
    assert out.names == []


def test_clip_windows_close_on_stream_time_and_flush():
    windows = ClipWindows(clip_seconds=10, first_index=5, close_delay_s=1)
    assert windows.add(face("face_1", 100.0)) == []
    assert windows.add(voice("voice_1", 108, 110.5, "hi")) == []
    assert windows.add(face("face_1", 110.5)) == []  # within the close delay: still the first window
    closed = windows.add(face("face_1", 111.2))
    assert [(c.clip_index, c.start_ns, c.end_ns, len(c.faces), len(c.voices)) for c in closed] == [
        (5, 100 * S, 110 * S, 2, 1)
    ]
    closed = windows.add(face("face_2", 135.0))  # skips empty windows; indexes follow stream time
    assert [c.clip_index for c in closed] == [6]
    late = windows.add(face("face_3", 101.0))  # late evidence joins the open window, not lost
    assert late == []
    closed = windows.flush()
    assert [(c.clip_index, [f.face_id for f in c.faces]) for c in closed] == [(8, ["face_2", "face_3"])]
    assert windows.flush() == []


def test_clip_windows_tick():
    windows = ClipWindows(clip_seconds=30)
    windows.add(face("face_1", 5.0))  # windows start at the first evidence of the run
    assert windows.tick(34 * S) == []
    assert [c.clip_index for c in windows.tick(35 * S)] == [0]


def test_clip_windows_keep_one_keyframe_per_clip():
    windows = ClipWindows(clip_seconds=10)
    assert windows.wants_keyframe(0)
    windows.add_keyframe(0, b"first")
    assert not windows.wants_keyframe(5 * S)
    windows.add(face("face_1", 6.0))
    closed = windows.add_keyframe(12 * S, b"second")  # a frame of the next window closes this one
    assert [(c.clip_index, c.keyframe_jpeg) for c in closed] == [(0, b"first")]
    assert [c.keyframe_jpeg for c in windows.flush()] == []  # a window with only a keyframe holds no evidence


@pytest.mark.parametrize(
    ("transcript", "own", "others"),
    [
        ("hi dana i'm eli i just moved in", ["Eli"], ["Dana"]),  # lower case, no punctuation
        ("hello i am frank we met yesterday", ["Frank"], []),
        ("i'm allergic to peanuts", [], []),
        ("i am married and happy", [], []),
    ],
)
def test_names_in_unpunctuated_transcripts(transcript, own, others):
    assert names_in(transcript) == (own, others)


@pytest.mark.parametrize(
    ("transcript", "names"),
    [
        ("gina can you open the window", ["Gina"]),
        ("hank, your bag is here", ["Hank"]),
        ("thanks ivy. do you want tea?", ["Ivy"]),
        ("gina this is hank", []),  # introduces someone, asks nobody anything
        ("sure i will. gina, could you help me", ["Gina"]),  # the name opens a later sentence of the turn
        ("coffee is ready", []),
        ("look, you should try it", []),
    ],
)
def test_vocatives_in(transcript, names):
    assert vocatives_in(transcript) == names


def _three_people(voices):
    faces = [face("face_1", 1.0), face("face_2", 1.0), face("face_3", 1.0)]
    ids = {p: p for p in ("face_1", "face_2", "face_3", "voice_1", "voice_2", "voice_3")}
    return ClipEvidence(0, 0, 30 * S, faces=faces, voices=voices, matches=[]), ids


def test_the_one_who_answers_a_called_out_question_gets_the_name():
    clip, ids = _three_people(
        [voice("voice_1", 3, 4, "gina can you open the window"), voice("voice_2", 6, 7, "sure i will do it")]
    )
    out = RulesMemorizer().memorize(clip, ids, lambda e: None)
    assert out.names == [("voice_2", "Gina")]
    assert "<voice_2> is called Gina." in [d.text for d in out.drafts]


def test_a_name_called_out_later_in_a_turn_names_the_next_speaker():
    clip, ids = _three_people(
        [
            voice("voice_2", 1, 2, "sure i will water the plants"),
            voice("voice_2", 3, 4, "gina can you open the window"),
            voice("voice_3", 6, 7, "yes on monday"),
        ]
    )
    assert RulesMemorizer().memorize(clip, ids, lambda e: None).names == [("voice_3", "Gina")]


def test_a_speaker_continuing_their_turn_is_one_turn():
    clip, ids = _three_people(
        [
            voice("voice_1", 3, 4, "thanks ivy"),
            voice("voice_1", 4.5, 5, "do you want tea"),
            voice("voice_3", 6, 7, "no thank you"),
        ]
    )
    assert RulesMemorizer().memorize(clip, ids, lambda e: None).names == [("voice_3", "Ivy")]


@pytest.mark.parametrize(
    "voices",
    [
        # nobody answers soon after
        [voice("voice_1", 3, 4, "gina can you open the window"), voice("voice_2", 20, 21, "sure")],
        # the next speaker says who they are
        [voice("voice_1", 3, 4, "gina can you open the window"), voice("voice_2", 5, 6, "i'm kim, gina left")],
        # no question or request after the name
        [voice("voice_1", 3, 4, "gina this is hank"), voice("voice_2", 5, 6, "hello")],
    ],
)
def test_called_out_names_are_not_guessed_without_an_answer(voices):
    clip, ids = _three_people(voices)
    names = RulesMemorizer().memorize(clip, ids, lambda e: None).names
    assert ("voice_2", "Gina") not in names


def test_self_introduction_inside_a_longer_utterance_names_the_speaker():
    clip, ids = _three_people([voice("voice_2", 3, 6, "hi dana i'm eli i just moved in next door")])
    out = RulesMemorizer().memorize(clip, ids, lambda e: None)
    assert ("voice_2", "Eli") in out.names
    assert "<voice_2> is called Eli." in [d.text for d in out.drafts]


def test_clip_windows_keep_keyframes_spread_over_the_clip():
    windows = ClipWindows(clip_seconds=30, keyframes=3)
    for t in range(0, 30, 5):
        if windows.wants_keyframe(t * S):
            windows.add_keyframe(t * S, f"frame {t}".encode())
    windows.add(face("face_1", 6.0))
    (closed,) = windows.flush()
    assert [jpeg for _, jpeg in closed.keyframes] == [b"frame 0", b"frame 10", b"frame 20"]
    assert closed.keyframe_jpeg == b"frame 0"  # the one stored with the clip


def test_one_evidence_stamped_far_ahead_opens_no_clip():
    """Issue 13: one message stamped near INT32_MAX opened clip 71 582 754 and the next minute of
    evidence was filed into it."""
    windows = ClipWindows(clip_seconds=30, first_index=0)
    windows.add(face("face_1", 1000.0))
    with pytest.raises(StampRejected, match="outside"):
        windows.add(voice("voice_1", 2_147_483_640.0, 2_147_483_650.0, "hi"))
    with pytest.raises(StampRejected, match="jumps"):
        windows.add(match("face_1", "voice_1", 1_000_000.0))
    with pytest.raises(StampRejected, match="jumps"):
        windows.add_keyframe(1_000_000 * S, b"far")
    closed = [c for t in range(1005, 1065, 5) for c in windows.add(face("face_1", float(t)))]  # the next minute
    closed += windows.flush()
    assert [(c.clip_index, c.start_ns // S, len(c.faces)) for c in closed] == [(0, 1000, 6), (1, 1030, 6), (2, 1060, 1)]


def test_an_utterance_that_ends_before_it_starts_is_not_kept():
    windows = ClipWindows(clip_seconds=30)
    windows.add(face("face_1", 100.0))
    with pytest.raises(StampRejected, match="before it starts"):
        windows.add(voice("voice_1", 105.0, 104.0, "backwards"))
    assert [c.voices for c in windows.flush()] == [[]]


def test_windows_restart_where_the_stream_moved_for_good():
    """A recording replayed at wall-clock time after media time: indices continue, nothing far ahead."""
    windows = ClipWindows(clip_seconds=30, first_index=4)
    windows.add(face("face_1", 10.0))
    wall = 1_700_000_000.0
    for k in range(2):
        with pytest.raises(StampRejected):
            windows.add(face("face_1", wall + k))
    closed = windows.add(face("face_1", wall + 2))
    assert [(c.clip_index, c.start_ns // S) for c in closed] == [(4, 10)]
    closed = windows.add(face("face_1", wall + 40))
    assert [(c.clip_index, c.start_ns // S) for c in closed] == [(5, wall + 2)]
    assert [c.clip_index for c in windows.flush()] == [6]


JUMP = [face("face_2", 5000.0 + k) for k in range(4)] + [face("face_2", 5012.0)]  # taken once 3 stamps agree
AFTER_STORED = [face("face_1", 112.0), voice("voice_1", 109.0, 113.0, "late"), face("face_1", 125.0), *JUMP]


@pytest.mark.parametrize(("later", "indices"), [(AFTER_STORED, [3, 4, 5, 6]), (JUMP, [3, 4])])
def test_restored_windows_close_and_number_the_clips_like_the_originals(later, indices):
    """A resumed replay restores the windows at a clip start: the open window comes back without its
    evidence (its clip is stored) yet closes as it would have, so later clips keep their indices and
    contents, also when the stream's time restarts while that window is open (indices continue)."""
    original = ClipWindows(clip_seconds=10, first_index=3, close_delay_s=1, origin_ns=100 * S, max_jump_s=600)
    original.add(face("face_1", 100.0))
    original.add(face("face_1", 110.5))  # window 3 still open (close delay) when window 4 starts
    restored = ClipWindows(clip_seconds=10, first_index=0, close_delay_s=1, origin_ns=0, max_jump_s=600)
    restored.restore(original.checkpoint())

    def run(windows: ClipWindows) -> list[tuple]:
        closed = []
        for item in later:
            try:
                closed += windows.add(item)
            except StampRejected:
                pass
        closed += windows.flush()
        return [
            (c.clip_index, c.start_ns, [f.face_id for f in c.faces], [v.transcript for v in c.voices]) for c in closed
        ]

    expected, got = run(original), run(restored)
    assert [c[0] for c in expected] == indices, expected
    assert got == expected[1:]  # the same clips after the stored one, by index, window and content
