"""Who holds what from one clip's boxes (memorize.holders, issue 23 part 3): picks up, holds, puts down;
a one-image glitch is no event; the nearer (smaller) person of two; a face with no person box; faces
found in a nearby image; the memories the rules memorizer writes from it."""

from __future__ import annotations

from m3mem_evidence import S, clip, seen

from m3_memory.graph.records import FaceEvidence
from m3_memory.memorize.holders import HolderEvent, body_of, holder_events
from m3_memory.memorize.seen import describe_seen, seen_drafts

IDS = {"face_7": "face_1", "face_8": "face_2"}
ALICE_FACE, ALICE_BODY = (100.0, 50.0, 40.0, 40.0), (60.0, 30.0, 120.0, 320.0)
BOB_FACE, BOB_BODY = (400.0, 60.0, 40.0, 40.0), (360.0, 40.0, 120.0, 320.0)
IN_ALICE_HANDS, ON_TABLE = (130.0, 200.0, 30.0, 30.0), (250.0, 380.0, 40.0, 40.0)
TIMES = [0.5 * k for k in range(8)]


def face_at(face_id: str, box, t: float) -> FaceEvidence:
    return FaceEvidence(face_id, 1, box, 0.9, round(t * S), [1.0, 0.0], b"", 0.5)


def scene(cup_boxes, times=TIMES, persons=True, face_offset_s=0.0, bob=False):
    faces = [face_at("face_7", ALICE_FACE, t + face_offset_s) for t in times]
    objects = [seen("object_1", "cup", t, box=box) for t, box in zip(times, cup_boxes, strict=True)]
    if persons:
        objects += [seen("object_9", "person", t, box=ALICE_BODY) for t in times]
    if bob:
        faces += [face_at("face_8", BOB_FACE, t + face_offset_s) for t in times]
        objects += [seen("object_8", "person", t, box=BOB_BODY) for t in times]
    return clip(0, faces=faces, objects=objects)


def kinds(events: list[HolderEvent]) -> list[tuple[str, str, float]]:
    return [(e.face_id, e.kind, e.stamp_ns / S) for e in events]


def test_picks_up_then_puts_down():
    boxes = [ON_TABLE] * 2 + [IN_ALICE_HANDS] * 4 + [ON_TABLE] * 2
    assert kinds(holder_events(scene(boxes), IDS)) == [("face_1", "picks up", 1.0), ("face_1", "puts down", 3.0)]


def test_held_all_along_and_a_one_image_glitch_is_no_event():
    assert kinds(holder_events(scene([IN_ALICE_HANDS] * 8), IDS)) == [("face_1", "holds", 0.0)]
    glitch = [ON_TABLE] * 3 + [IN_ALICE_HANDS] + [ON_TABLE] * 4
    assert holder_events(scene(glitch), IDS) == []


def test_the_person_whose_box_holds_it_not_the_other_one():
    in_bob_hands = (420.0, 220.0, 30.0, 30.0)
    assert kinds(holder_events(scene([in_bob_hands] * 8, bob=True), IDS)) == [("face_2", "holds", 0.0)]


def test_a_face_with_no_person_box_stands_in_for_its_body():
    body = body_of(ALICE_FACE)
    assert body[0] < ALICE_FACE[0] and body[2] > ALICE_FACE[2] and body[3] > 5 * ALICE_FACE[3]
    assert kinds(holder_events(scene([IN_ALICE_HANDS] * 8, persons=False), IDS)) == [("face_1", "holds", 0.0)]


def test_faces_of_a_nearby_image_count_and_far_ones_do_not():
    held = [IN_ALICE_HANDS] * 8
    assert kinds(holder_events(scene(held, face_offset_s=0.2), IDS)) == [("face_1", "holds", 0.0)]
    times = [3.0 * k for k in range(4)]
    assert holder_events(scene(held[:4], times=times, face_offset_s=1.0), IDS) == []


def test_the_rules_memorizer_says_who_picked_it_up_and_the_model_is_shown_it():
    boxes = [ON_TABLE] * 2 + [IN_ALICE_HANDS] * 6
    assert [d.text for d in seen_drafts(scene(boxes), IDS)] == ["<face_1> picks up a cup."]
    assert "Held: <face_1> picks up cup 1.0 s" in describe_seen(scene(boxes), IDS, 0)


def test_who_holds_it_is_said_and_the_others_in_view_are_not_seen_with_it():
    """Bob holds the cup all along while Alice is in view: the boxes say who has it, so Alice is not
    'seen near a cup' (a question "who was seen with a cup?" finds Bob)."""
    in_bob_hands = (420.0, 220.0, 30.0, 30.0)
    assert [d.text for d in seen_drafts(scene([in_bob_hands] * 8, bob=True), IDS)] == ["<face_2> holds a cup."]
