"""`m3 bench identity`'s figures on small hand-made truths and memories."""

import numpy as np
import pytest

from m3_agent.bench.identity import aggregate, episode_scripts
from m3_agent.bench.identity_metrics import (
    MemoryIdentity,
    diarization_error,
    identity_figures,
    match_faces,
    speakers_per_voice,
    voice_ids_per_speaker,
    voice_of_people,
)

PHOTO = "skimage:astronaut"


def _truth(utterances, people=None, scenes=None):
    people = people or {
        "ana": {"name": "Ana", "named": True, "photo": PHOTO},
        "ravi": {"name": "Ravi", "named": True, "photo": "skimage:camera"},
        "guest": {"name": "Invented", "named": False, "photo": "matplotlib:grace_hopper.jpg"},
    }
    scenes = scenes or [{"present": sorted(p for p, s in people.items() if s.get("photo")), "start_s": 0, "end_s": 30}]
    return {
        "people": people,
        "utterances": [{"person": p, "text": "", "start_s": s, "end_s": e} for p, s, e in utterances],
        "scenes": scenes,
    }


TRUTH = _truth([("ana", 1, 4), ("ravi", 4, 7), ("guest", 8, 11), ("ana", 10.5, 13)])  # 0.5 s overlap


def test_a_perfect_diarization_scores_zero_and_boundary_jitter_is_forgiven():
    perfect = [(s["start_s"], s["end_s"], f"voice_{s['person']}") for s in TRUTH["utterances"]]
    assert diarization_error(TRUTH, perfect)[0] == pytest.approx(0.0, abs=1e-6)
    jittered = [(s + 0.2, e - 0.2, v) for s, e, v in perfect]
    assert diarization_error(TRUTH, jittered)[0] == pytest.approx(0.0, abs=0.02)
    one_voice = [(1.0, 13.0, "voice_1")]  # everything on one voice: most speech confused, gaps false alarm
    assert diarization_error(TRUTH, one_voice)[0] > 0.4


def test_voice_ids_per_speaker_counts_split_voices():
    segments = [(1, 2.5, "v1"), (2.5, 4, "v2"), (4, 7, "v3"), (8, 11, "v4"), (10.5, 13, "v1")]
    assert voice_ids_per_speaker(TRUTH, segments) == pytest.approx((2 + 1 + 1) / 3)
    assert speakers_per_voice(TRUTH, segments) == 1.0
    merged = [(1, 4, "v1"), (4, 7, "v1"), (8, 13, "v2")]  # Ana and Ravi under one id
    assert speakers_per_voice(TRUTH, merged) == pytest.approx((2 + 2) / 2)  # v2 also covers Ana's 11-13 s
    assert voice_of_people(TRUTH, segments)["ana"] == "v1"  # 1.5 + 2.0 s of solo speech against v2's 1.5


def _memory(names, person_of=None, segments=None, face_of=None):
    segments = segments or [(1, 4, "voice_1"), (4, 7, "voice_2"), (8, 11, "voice_3"), (10.5, 13, "voice_1")]
    person_of = person_of or {
        "voice_1": "person_1",
        "face_1": "person_1",
        "voice_2": "person_2",
        "face_2": "person_2",
        "voice_3": "person_3",
        "face_3": "person_3",
    }
    face_of = face_of or {"ana": "face_1", "ravi": "face_2", "guest": "face_3"}
    return MemoryIdentity(segments, person_of, names, face_of)


def test_right_names_and_an_unnamed_person_left_unnamed_are_perfect():
    figures = identity_figures(TRUTH, _memory({"person_1": "Ana", "person_2": "ravi", "person_3": ""}))
    assert figures["names_right"] == 1.0 and figures["named_people"] == 2
    assert (figures["names_missing"], figures["names_wrong"], figures["names_invented"]) == (0, 0, 0)
    assert figures["binding_accuracy"] == 1.0 and figures["bindable"] == 3


def test_a_wrong_name_counts_wrong_and_a_name_on_the_unnamed_person_counts_invented():
    figures = identity_figures(TRUTH, _memory({"person_1": "Ravi", "person_2": "", "person_3": "Ana"}))
    assert figures["names_right"] == 0.0
    assert figures["names_wrong"] == 1 and figures["names_missing"] == 1
    assert figures["names_invented"] == 1  # "Ana" is a real name, but on the guest whose name is never said
    assert figures["people"]["ana"]["name"] == "Ravi"


def test_a_name_said_by_no_one_on_a_stray_person_counts_invented():
    figures = identity_figures(
        TRUTH, _memory({"person_1": "Ana", "person_2": "Ravi", "person_3": "", "person_9": "Harbour"})
    )
    assert figures["names_right"] == 1.0 and figures["names_invented"] == 1


def test_binding_fails_when_face_and_voice_stay_apart_and_heard_only_people_are_not_bindable():
    people = {
        "ana": {"name": "Ana", "named": True, "photo": PHOTO},
        "ravi": {"name": "Ravi", "named": True, "photo": "skimage:camera"},
        "phone": {"name": "Tomas", "named": True},  # only heard
    }
    truth = _truth([("ana", 1, 4), ("ravi", 4, 7), ("phone", 8, 11)], people)
    person_of = {"voice_1": "person_1", "face_1": "person_1", "voice_2": "person_2", "face_2": "person_5"}
    person_of["voice_3"] = "person_3"
    memory = _memory({"person_1": "Ana", "person_3": "Tomas"}, person_of, face_of={"ana": "face_1", "ravi": "face_2"})
    memory.voice_segments = [(1, 4, "voice_1"), (4, 7, "voice_2"), (8, 11, "voice_3")]
    figures = identity_figures(truth, memory)
    assert figures["bindable"] == 2 and figures["binding_accuracy"] == 0.5
    assert figures["names_right"] == pytest.approx(2 / 3, abs=1e-4) and figures["names_missing"] == 1


def test_faces_go_to_the_nearest_photo_and_each_person_keeps_the_most_seen_face():
    rng = np.random.default_rng(0)
    ana, ravi = rng.standard_normal(128), rng.standard_normal(128)
    faces = {
        "face_1": [ana + 0.1 * rng.standard_normal(128) for _ in range(3)],
        "face_2": [ravi + 0.1 * rng.standard_normal(128)],
        "face_7": [ana + 0.2 * rng.standard_normal(128)],
    }
    counts = {"face_1": 40, "face_2": 30, "face_7": 2}
    assert match_faces({"ana": ana, "ravi": ravi}, faces, counts) == {"ana": "face_1", "ravi": "face_2"}


def test_aggregate_weights_der_by_speech_and_sums_name_counts():
    rows = [
        {"der": 0.1, "speech_s": 100, "voice_ids_per_speaker": 1.0, "speakers_per_voice": 1.0,
         "binding_accuracy": 1.0, "bindable": 3,
         "names_right": 1.0, "named_people": 3, "names_missing": 0, "names_wrong": 0, "names_invented": 1,
         "person_accuracy": 0.5, "person_questions": 4, "accuracy": 0.5, "questions": 10},
        {"der": 0.4, "speech_s": 50, "voice_ids_per_speaker": 2.0, "speakers_per_voice": 1.0,
         "binding_accuracy": 0.0, "bindable": 1,
         "names_right": 0.0, "named_people": 1, "names_missing": 1, "names_wrong": 0, "names_invented": 0,
         "person_accuracy": 1.0, "person_questions": 4, "accuracy": 1.0, "questions": 10},
    ]  # fmt: skip
    split = aggregate(rows)
    assert split["der"] == pytest.approx(0.2) and split["voice_ids_per_speaker"] == 1.5
    assert split["binding_accuracy"] == 0.75 and split["names_right"] == 0.75
    assert (split["names_missing"], split["names_invented"]) == (1, 1)
    assert split["person_accuracy"] == 0.75 and split["accuracy"] == 0.75


def test_episode_selection_by_split_and_glob():
    assert {s for s, _ in episode_scripts("both", None)} == {"dev", "test"}
    assert all(s == "test" for s, _ in episode_scripts("test", None))
    ((split, path),) = episode_scripts("dev", "bike_*")
    assert (split, path.stem) == ("dev", "bike_workshop")
    with pytest.raises(SystemExit, match="no episode script"):
        episode_scripts("dev", "no_such_episode")


def test_read_memory_puts_segments_on_the_episode_clock_and_follows_aliases(tmp_path):
    from m3_agent.bench.identity import read_memory
    from m3_memory.store.sqlite_store import MemoryStore, vector_to_blob

    origin, clip_ns = 1_700_000_000 * 10**9, 30 * 10**9
    store = MemoryStore(str(tmp_path / "memory"))
    with store.transaction() as conn:
        for index in (1, 2):  # clip 0 held nothing, so it was never stored
            start = origin + index * clip_ns
            conn.execute("INSERT INTO clips VALUES (?, ?, ?, 0, '[]', NULL)", (index, start, start + clip_ns))
        for seq, (text, a, b) in enumerate(
            [('<voice_1> says: "hi"', 31.0, 33.5), ('<voice_4> says: "yes"', 61.0, 62.0), ("<face_1> is seen.", 31, 50)]
        ):
            conn.execute(
                "INSERT INTO text_nodes VALUES (?, ?, 'episodic', ?, 1, ?, ?, 1.0, ?)",
                (f"n{seq}", seq, text, origin + round(a * 1e9), origin + round(b * 1e9), vector_to_blob(np.zeros(4))),
            )
        entities = [("person_1", 1, "person", "Ana", "", 0), ("person_2", 2, "person", "", "", 0)]
        entities += [("voice_1", 1, "voice", "", "person_2", 5), ("face_1", 1, "face", "", "person_1", 9)]
        for row in entities:
            conn.execute(
                "INSERT INTO entities(entity_id, seq, kind, name, person_id, observation_count) VALUES (?,?,?,?,?,?)",
                row,
            )
        conn.execute("INSERT INTO aliases VALUES ('person_2', 'person_1', 2, 'merged')")
        conn.execute("INSERT INTO aliases VALUES ('voice_4', 'voice_1', 2, 'merged')")
        conn.execute("INSERT INTO entity_embeddings VALUES ('face_1', 0, ?)", (vector_to_blob(np.ones(4)),))
    store.close()
    memory, faces, counts = read_memory(tmp_path / "memory")
    assert memory.voice_segments == [(31.0, 33.5, "voice_1"), (61.0, 62.0, "voice_1")]
    assert memory.person_of == {"voice_1": "person_1", "face_1": "person_1"}
    assert memory.names == {"person_1": "Ana", "person_2": ""}
    assert list(faces) == ["face_1"] and counts == {"face_1": 9}


def test_memory_fingerprint_changes_with_the_parameters(tmp_path):
    from m3_agent.bench.identity import memory_fingerprint

    stamp, params = tmp_path / "script.sha256", tmp_path / "m3.yaml"
    stamp.write_text("abc")
    params.write_text("perception_node: {}\n")
    first = memory_fingerprint(stamp, str(params), {})
    assert memory_fingerprint(stamp, str(params), {}) == first
    assert memory_fingerprint(stamp, str(params), {"memory_node": {"memorizer": "openai"}}) != first
    params.write_text("perception_node: {ros__parameters: {face_rate_hz: 2.0}}\n")
    assert memory_fingerprint(stamp, str(params), {}) != first


def test_another_spelling_of_the_name_is_the_name():
    people = {
        "sofia": {"name": "Sofia", "spellings": ["Sophia"], "named": True, "photo": PHOTO},
        "ravi": {"name": "Ravi", "named": True, "photo": "skimage:camera"},
    }
    truth = _truth([("sofia", 1, 4), ("ravi", 4, 7)], people)
    memory = _memory({"person_1": "Sophia", "person_2": "Sophia"}, face_of={"sofia": "face_1", "ravi": "face_2"})
    memory.voice_segments = [(1, 4, "voice_1"), (4, 7, "voice_2")]
    figures = identity_figures(truth, memory)
    assert figures["names_right"] == 0.5 and figures["names_wrong"] == 1 and figures["names_invented"] == 0


def test_bench_identity_is_wired_into_the_m3_command():
    import subprocess

    result = subprocess.run(["m3", "bench", "identity", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--split {dev,test,both}" in result.stdout and "--episodes GLOB" in result.stdout
