"""Objects and written text perception saw, as memories (issue 23): the pure logic (memorize.seen), the
rules memorizer and the model's clip text, clip windows, message conversion, and a search that finds
what a note said (both back-ends)."""

from __future__ import annotations

import pytest
from m3mem_evidence import S, clip, face, read, seen, voice
from memory_backends import open_memory

from m3_interfaces.msg import ObjectTrack, TextRegion
from m3_memory.clip_window import ClipWindows
from m3_memory.evidence_msgs import object_evidence, text_evidence
from m3_memory.graph.records import ObjectEvidence
from m3_memory.memorize.clip_prompt import describe
from m3_memory.memorize.rules import RulesMemorizer
from m3_memory.memorize.seen import seen_drafts, seen_objects, seen_texts

BACKENDS = ("sqlite", "milvus")  # the search test runs on both back-ends
IDS = {"face_7": "face_1", "face_8": "face_2", "voice_3": "voice_1"}


def test_objects_grouped_by_class_people_left_to_faces_and_faces_in_view_named():
    evidence = clip(
        0,
        faces=[face("face_7", 2.0), face("face_8", 9.0)],
        objects=[
            seen("object_1", "cup", 2.2), seen("object_1", "cup", 2.7), seen("object_4", "Cup", 12.0),
            seen("object_2", "person", 2.2), seen("object_3", "umbrella", 9.1), seen("object_5", " ", 3.0),
        ],
    )  # fmt: skip
    objects = seen_objects(evidence, IDS)
    assert [(o.label, o.object_ids, o.with_faces) for o in objects] == [
        ("cup", ["object_1", "object_4"], ["face_1"]),  # object_4 at 12 s: nobody in view then
        ("umbrella", ["object_3"], ["face_2"]),
    ]
    assert (objects[0].first_ns, objects[0].last_ns) == (int(2.2 * S), 12 * S)
    assert [d.text for d in seen_drafts(evidence, IDS)] == [
        "<face_1> is seen near a cup (2 of them).",
        "<face_2> is seen near an umbrella.",
    ]


def test_an_object_with_nobody_or_two_people_in_view():
    evidence = clip(0, faces=[face("face_7", 5.0), face("face_8", 5.2)],
                    objects=[seen("object_1", "apple", 1.0), seen("object_2", "laptop", 5.1)])  # fmt: skip
    assert [d.text for d in seen_drafts(evidence, IDS)] == [
        "An apple is seen.",
        "<face_1> and <face_2> are seen near a laptop.",
    ]


def test_text_once_per_reading_with_the_most_confident_reading_of_a_region():
    evidence = clip(
        0,
        texts=[
            read("text_1", "Dentist  Tuesday 3 pm", 1.0, 0.90), read("text_1", "Dentist Tuesday 3 pm!", 4.0, 0.97),
            read("text_2", "dentist tuesday 3 pm!", 6.0),  # the same note read at another place: once
            read("text_3", "EXIT", 7.0), read("text_4", "  ", 8.0),
        ],
    )  # fmt: skip
    texts = seen_texts(evidence)
    assert [(t.text, t.first_ns, t.last_ns) for t in texts] == [
        ("Dentist Tuesday 3 pm!", 1 * S, 6 * S),
        ("EXIT", 7 * S, 7 * S),
    ]
    assert [d.text for d in seen_drafts(evidence, {})] == [
        'A written note or sign says: "Dentist Tuesday 3 pm!"',
        'A written note or sign says: "EXIT"',
    ]


def test_lines_of_one_note_are_one_text_and_a_line_missed_in_one_keyframe_adds_nothing():
    from dataclasses import replace

    def line(region_id, text, t, x, y, h=20.0, w=160.0):
        return replace(read(region_id, text, t), bbox=(x, y, w, h))

    evidence = clip(
        0,
        texts=[
            # keyframe at 2 s: a two-line note (the second line 0.8 line heights under the first, a little
            # to the right, as a turned note reads) and a sign far below it
            line("text_1", "Please take", 2.0, 20.0, 100.0), line("text_2", "off your shoes", 2.0, 28.0, 136.0),
            line("text_3", "EXIT", 2.0, 20.0, 400.0),
            # keyframe at 5 s: only the note's first line read; a line beside it (no overlap across) stays apart
            line("text_1", "Please take", 5.0, 20.0, 100.0), line("text_4", "Room 12", 5.0, 300.0, 136.0),
            # keyframe at 8 s: big letters over small ones are two texts
            line("text_5", "SALE", 8.0, 20.0, 200.0, h=60.0), line("text_6", "ends Monday", 8.0, 20.0, 270.0),
            # keyframe at 11 s: a turned note's padded boxes overlap a little; a lone stroke read as "K" is no text
            line("text_7", "Call the", 11.0, 20.0, 300.0, h=30.0), line("text_8", "plumber", 11.0, 25.0, 322.0, h=30.0),
            line("text_9", "K", 11.0, 400.0, 20.0), line("text_10", " . ", 11.0, 400.0, 200.0),
        ],
    )  # fmt: skip
    texts = seen_texts(evidence)
    assert [(t.text, t.first_ns, t.last_ns) for t in texts] == [
        ("Please take off your shoes", 2 * S, 5 * S),
        ("EXIT", 2 * S, 2 * S),
        ("Room 12", 5 * S, 5 * S),
        ("SALE", 8 * S, 8 * S),
        ("ends Monday", 8 * S, 8 * S),
        ("Call the plumber", 11 * S, 11 * S),
    ]


@pytest.mark.parametrize("understand", [True, False])  # False: the record the openai memorizer keeps
def test_both_memorizers_store_what_was_seen_and_the_model_is_shown_it(understand):
    evidence = clip(
        0,
        faces=[face("face_7", 2.0)],
        voices=[voice("voice_3", 3, 4, "Here is the note.")],
        objects=[seen("object_1", "book", 2.0)],
        texts=[read("text_1", "Call Ana at 5", 2.0)],
    )
    texts = [d.text for d in RulesMemorizer(understand=understand).memorize(evidence, IDS, lambda e: None).drafts]
    assert "<face_1> is seen near a book." in texts
    assert 'A written note or sign says: "Call Ana at 5"' in texts
    shown = describe(evidence, IDS, lambda e: None, lambda e: "").text
    assert "Objects seen: book (1) 2.0-2.0 s with <face_1>" in shown
    assert 'Written text seen: "Call Ana at 5"' in shown


def test_a_clip_that_only_saw_things_is_stored_by_the_windows():
    windows = ClipWindows(clip_seconds=10.0)
    assert windows.add(read("text_1", "Fire exit", 1.0)) == []
    windows.add(seen("object_1", "chair", 2.0))
    closed = windows.add(seen("object_1", "chair", 12.0))
    assert len(closed) == 1 and not closed[0].is_empty()
    assert [t.text for t in closed[0].texts] == ["Fire exit"] and [o.label for o in closed[0].objects] == ["chair"]


def test_messages_to_evidence():
    track = ObjectTrack(object_id="object_2", label=" cup ", confidence=0.5, x=1.0, y=2.0, width=3.0, height=4.0)
    assert object_evidence(track, 7) == ObjectEvidence("object_2", "cup", 0.5, (1.0, 2.0, 3.0, 4.0), 7)
    region = TextRegion(region_id="text_1", text=" Exit ", confidence=0.75, x=5.0, y=6.0, width=7.0, height=8.0)
    evidence = text_evidence(region, 9)
    assert (evidence.region_id, evidence.text, evidence.confidence, evidence.bbox, evidence.stamp_ns) == (
        "text_1", "Exit", 0.75, (5.0, 6.0, 7.0, 8.0), 9
    )  # fmt: skip


def test_a_search_finds_what_a_note_said_and_what_was_seen(request, tmp_path, embedder, backend_name):
    server = request.getfixturevalue("milvus_server") if backend_name == "milvus" else None
    mem = open_memory(backend_name, str(tmp_path / "m"), embedder, server)
    try:
        mem.ingest(clip(0, faces=[face("face_1", 1)], voices=[voice("voice_1", 2, 4, "I like green tea")]))
        mem.ingest(clip(1, texts=[read("text_1", "Dentist on Tuesday at 3 pm", 31.0)]))  # nobody there
        mem.ingest(clip(2, faces=[face("face_2", 61)], objects=[seen("object_1", "umbrella", 61.2)]))
        hits = mem.search.search_node("When is the dentist appointment?", top_k=1)
        assert [h.text for h in hits] == ['A written note or sign says: "Dentist on Tuesday at 3 pm"']
        clips = mem.search.search_clip("Who had an umbrella?", top_k=1, threshold=-1.0)
        assert [c.clip_index for c in clips] == [2]
        assert any("is seen near an umbrella" in m.text for m in clips[0].episodic), clips[0].episodic
    finally:
        mem.close()
