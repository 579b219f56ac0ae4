"""Revisable voices, the memory's side (issue 20): perception's revisions (VoiceRevision) change the clip
not yet stored, and a merge also unites the persons stored clips made of the two voice ids."""

from __future__ import annotations

import json

import pytest
from m3mem_evidence import S, clip, face, match, voice
from memory_backends import fresh_prefix, open_memory

from m3_interfaces.msg import IdentityUpdate
from m3_memory.clip_window import ClipWindows
from m3_memory.evidence_msgs import voice_revision
from m3_memory.graph.records import VoiceRevision

BACKENDS = ("sqlite", "milvus")  # the tests on the `memory` fixture run on both back-ends


def revision(merges=(), corrections=(), t: float = 0.0) -> VoiceRevision:
    return VoiceRevision(int(t * S), list(merges), list(corrections))


def ids(clip_evidence) -> list[str]:
    return [v.voice_id for v in clip_evidence.voices]


# -- clip windows -------------------------------------------------------------------------------------
def test_corrections_and_merges_change_the_open_clip_only():
    windows = ClipWindows(clip_seconds=10, close_delay_s=1, origin_ns=100 * S)
    first = voice("voice_1", 100, 102, "hello")  # segment 1000
    windows.add(first)
    windows.add(voice("voice_2", 103, 105, "hi there"))  # segment 1030
    windows.add(voice("voice_1", 106, 107, "mm"))  # segment 1060
    windows.add(match("face_1", "voice_2", 105))
    late = windows.revise(revision([("voice_2", "voice_1")], [(1060, "voice_1", ""), (1000, "voice_1", "voice_2")]))
    assert late == 0
    [closed] = windows.add(voice("voice_1", 112, 113, "next clip"))
    # the correction to voice_2 is then renamed by the merge: voice_2 is voice_1 now
    assert ids(closed) == ["voice_1", "voice_1", ""]
    assert (closed.matches[0].id1, closed.matches[0].id2) == ("face_1", "voice_1")
    assert closed.voice_merges == [("voice_2", "voice_1")]
    # the closed clip is handed over: correcting its utterances comes too late, and changes nothing
    assert windows.revise(revision(corrections=[(1030, "voice_1", "voice_3"), (1120, "voice_1", "voice_4")])) == 1
    assert ids(closed) == ["voice_1", "voice_1", ""] and first.voice_id == "voice_1"
    assert windows.flush()[0].voices[0].voice_id == "voice_4"  # the open clip's utterance was corrected
    assert windows.revise(revision(corrections=[(1, "", "")])) == 1  # no clip open: too late


def test_merges_without_an_open_clip_go_to_the_next_clip_with_evidence():
    windows = ClipWindows(clip_seconds=10, origin_ns=0)
    windows.revise(revision([("voice_3", "voice_2")]))  # nothing open yet
    windows.add_keyframe(1 * S, b"jpeg")  # a window of frames only stores nothing ...
    windows.revise(revision([("voice_4", "voice_2")]))
    assert windows.flush() == []
    windows.add(voice("voice_2", 15, 16, "hello"))  # ... so its merges wait for the next clip
    [stored] = windows.flush()
    assert stored.voice_merges == [("voice_3", "voice_2"), ("voice_4", "voice_2")]
    windows.add(voice("voice_2", 25, 26, "again"))
    assert windows.flush()[0].voice_merges == []


def _run(windows: ClipWindows, later) -> list[tuple]:
    closed = []
    for item in later:
        if isinstance(item, VoiceRevision):
            windows.revise(item)
        else:
            closed += windows.add(item)
    closed += windows.flush()
    return [(c.clip_index, ids(c), c.voice_merges) for c in closed]


def _restored(original: ClipWindows) -> ClipWindows:
    restored = ClipWindows(clip_seconds=10, close_delay_s=1, origin_ns=0)
    restored.restore(json.loads(json.dumps(original.checkpoint())))  # as m3 replay's snapshot keeps it
    return restored


def _windows(*steps) -> ClipWindows:
    windows = ClipWindows(clip_seconds=10, close_delay_s=1, origin_ns=100 * S)
    for step in steps:
        step(windows)
    return windows


LATER = [revision([("voice_5", "voice_2")]), voice("voice_2", 121, 122, "b"), voice("voice_2", 131, 132, "c")]
V3, V4, V5 = ("voice_3", "voice_1"), ("voice_4", "voice_1"), ("voice_5", "voice_2")


def test_checkpoint_carries_the_merges_not_stored_yet():
    """A resumed replay restores the windows at a clip start; merges go where the original's went."""
    first = [lambda w: w.add(voice("voice_1", 101, 102, "a"))]
    # the open window holds evidence: it is stored already, with its merges (those made after the
    # checkpoint too: the resumed run makes them again)
    held = _windows(*first, lambda w: w.revise(revision([V4])))
    restored = _restored(held)  # checkpointed before the original goes on
    expected, got = _run(held, LATER), _run(restored, LATER)
    assert expected[0] == (0, ["voice_1"], [V4, V5])
    assert got == expected[1:]  # the stored clip is not closed again
    # merges waiting for a window, and a window of frames only: their merges reach the next clip
    waiting = [*first, lambda w: w.flush(), lambda w: w.revise(revision([V3]))]
    frames = [*waiting, lambda w: w.add_keyframe(112 * S, b"jpeg"), lambda w: w.revise(revision([V4]))]
    for steps, merges in ((waiting, [V3, V5]), (frames, [V3, V4, V5])):
        original = _windows(*steps)
        restored = _restored(original)
        expected, got = _run(original, LATER), _run(restored, LATER)
        assert expected[0] == (2, ["voice_2"], merges)
        assert got == expected


# -- the memory ----------------------------------------------------------------------------------------
def test_a_merge_unites_the_persons_stored_clips_made(memory):
    graph = memory.graph
    memory.ingest(clip(0, voices=[voice("voice_1", 1, 3, "hello, I'm Alice")]))
    memory.ingest(clip(1, voices=[voice("voice_2", 31, 33, "my name is Alice, I like green tea")]))
    assert (graph.person_of("voice_1"), graph.person_of("voice_2")) == ("person_1", "person_2")
    stored = clip(2, voices=[voice("voice_1", 61, 63, "yes")])  # holds turns renamed by the merge
    stored.voice_merges = [("voice_2", "voice_1")]
    record = memory.ingest(stored)
    assert graph.person_of("voice_2") == graph.person_of("voice_1") == "person_1"  # the older person survives
    assert "person_1" in record.entity_ids and "person_2" not in record.entity_ids
    person = memory.search.get_entity("person_2")  # the merged person's id still resolves
    assert (person.entity_id, person.aliases, person.member_ids) == ("person_1", ["person_2"], ["voice_1", "voice_2"])
    assert graph.entities["person_1"].name_votes == {"Alice": 1.8} and person.name == "Alice"  # two votes, 0.9 each
    assert memory.search.get_entity("voice_2").entity_id == "voice_2"  # voices are kept, nothing deleted
    assert memory.search.get_stats().persons == 1 and graph.voice_merges_refused == 0


def test_a_merge_of_two_people_who_were_both_seen_is_refused(memory):
    memory.ingest(
        clip(
            0,
            faces=[face("face_1", 1)],
            voices=[voice("voice_1", 2, 4, "hello")],
            matches=[match("face_1", "voice_1", 4)],
        )
    )
    memory.ingest(
        clip(
            1,
            faces=[face("face_2", 31)],
            voices=[voice("voice_2", 32, 34, "hi")],
            matches=[match("face_2", "voice_2", 34)],
        )
    )
    stored = clip(2, voices=[voice("voice_1", 61, 63, "yes")])
    stored.voice_merges = [("voice_2", "voice_1")]
    memory.ingest(stored)
    assert memory.graph.person_of("voice_1") != memory.graph.person_of("voice_2")
    assert memory.graph.voice_merges_refused == 1 and memory.search.get_stats().persons == 2


def test_a_merged_id_seen_only_before_maps_the_other_id_to_its_voice(memory):
    """voice_1 first heard in the open clip, voice_2 stored before: voice_1's turns join voice_2's
    entity (by its embedding voice_1 would found a new voice)."""
    memory.ingest(clip(0, voices=[voice("voice_2", 1, 3, "hello")]))
    stored = clip(1, voices=[voice("voice_1", 31, 33, "hi"), voice("", 34, 35, "mm", seed=7)])  # "" a corrected line
    stored.voice_merges = [("voice_2", "voice_1")]
    record = memory.ingest(stored)
    assert memory.graph.session_map["voice_1"] == memory.graph.session_map["voice_2"] == "voice_1"
    assert memory.search.get_stats().voices == 1
    texts = [n.text for n in record.episodic]
    assert '<voice_1> says: "hi"' in texts and 'Someone (voice unclear) says: "mm"' in texts


def test_the_merge_is_stored_with_the_clip(tmp_path, embedder, backend_name, request):
    server = request.getfixturevalue("milvus_server") if backend_name == "milvus" else None
    prefix, path = fresh_prefix(), str(tmp_path / "mem")
    memory = open_memory(backend_name, path, embedder, server, prefix=prefix)
    memory.ingest(clip(0, voices=[voice("voice_1", 1, 3, "hello, I'm Alice")]))
    memory.ingest(clip(1, voices=[voice("voice_2", 31, 33, "hi")]))
    stored = clip(2, voices=[voice("voice_1", 61, 63, "yes")])
    stored.voice_merges = [("voice_2", "voice_1")]
    memory.ingest(stored)
    memory.close()
    memory = open_memory(backend_name, path, embedder, server, prefix=prefix)
    try:
        assert memory.graph.person_of("voice_2") == "person_1"
        person = memory.search.get_entity("person_2")
        assert (person.entity_id, person.aliases, person.name) == ("person_1", ["person_2"], "Alice")
    finally:
        memory.close()


# -- the node's conversion of IdentityUpdate ---------------------------------------------------------------
def _update(kind=4, merged=("voice_5",), into=("voice_2",), segments=(7,), previous=("voice_1",), now=("",)):
    msg = IdentityUpdate(kind=kind, merged_ids=list(merged), merged_into=list(into), segment_ids=list(segments))
    msg.previous_ids, msg.corrected_ids = list(previous), list(now)
    msg.header.stamp.sec, msg.header.stamp.nanosec = 12, 5
    return msg


def test_identity_updates_become_revisions_or_are_refused_whole():
    assert voice_revision(_update()) == VoiceRevision(12 * S + 5, [("voice_5", "voice_2")], [(7, "voice_1", "")])
    assert voice_revision(_update(previous=("",), now=("voice_3",))).corrections == [(7, "", "voice_3")]
    for bad, reason in (
        (_update(kind=2), "kind 2 is not EntityMatch.VOICE"),
        (_update(into=("voice_2", "voice_1")), "1 merged_ids but 2 merged_into"),
        (_update(now=()), "differ in length"),
        (_update(merged=("face_5",)), "merged_ids holds 'face_5'"),
        (_update(into=("",)), "merged_into holds ''"),
        (_update(previous=("speaker",)), "previous_ids holds 'speaker'"),
        (_update(merged=("voice_2",)), "merged into itself"),
    ):
        with pytest.raises(ValueError, match=reason):
            voice_revision(bad)
