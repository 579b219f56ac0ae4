"""Faces on real photographs: detection, embeddings, tracking, stable face_N ids, re-identification."""

import numpy as np
import pytest

from m3_perception.faces.face_encoder import FaceEncoder
from m3_perception.faces.iou_tracker import IouTracker, iou
from m3_perception.faces.pipeline import FaceParams, FacePipeline
from m3_perception.identity_clusters import IdentityClusters
from m3_perception.material.synthetic import compose, face_photos
from m3_perception.model_files import ModelFileMissing


@pytest.fixture(scope="module")
def encoder() -> FaceEncoder:
    return FaceEncoder()


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    return face_photos()


THREE = [("astronaut", 20, 100, 1.0), ("hopper", 230, 60, 0.7), ("cameraman", 440, 120, 1.0)]


def test_encode_three_real_faces(encoder: FaceEncoder, photos: dict[str, np.ndarray]) -> None:
    dets = encoder.encode(compose(photos, THREE))
    assert len(dets) == 3
    for d in dets:
        assert d.embedding.shape == (128,) and d.embedding.dtype == np.float32
        assert abs(float(np.linalg.norm(d.embedding)) - 1.0) < 1e-4
        assert 0.0 < d.score <= 1.0 and d.w > 40
    # The three people are pairwise farther apart than the default match distance.
    e = np.stack([d.embedding for d in dets])
    dist = np.linalg.norm(e[:, None] - e[None], axis=2)
    assert dist[np.triu_indices(3, 1)].min() > FaceParams().match_distance


def test_same_person_at_other_scale_is_close(encoder: FaceEncoder, photos: dict[str, np.ndarray]) -> None:
    a = encoder.encode(compose(photos, [("hopper", 100, 100, 1.0)]))
    b = encoder.encode(compose(photos, [("hopper", 300, 200, 0.55)]))
    assert len(a) == 1 and len(b) == 1
    assert float(np.linalg.norm(a[0].embedding - b[0].embedding)) < 0.25


def test_encode_rejects_non_rgb(encoder: FaceEncoder) -> None:
    with pytest.raises(ValueError, match="RGB"):
        encoder.encode(np.zeros((10, 10), np.uint8))


def test_missing_model_file_is_named(tmp_path) -> None:
    missing = tmp_path / "nope.dat"
    with pytest.raises(ModelFileMissing, match=r"nope\.dat"):
        FaceEncoder(recognition_model=missing)


def test_iou_tracker_keeps_ids_and_expires() -> None:
    assert iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0 and iou((0, 0, 10, 10), (20, 20, 5, 5)) == 0.0
    tr = IouTracker(min_iou=0.3, max_age_s=0.5)
    (t1, new1), (t2, new2) = tr.update([(0, 0, 10, 10), (50, 50, 10, 10)], 0.0)
    assert new1 and new2 and t1.track_id != t2.track_id
    (u1, n1), (u2, n2) = tr.update([(51, 51, 10, 10), (1, 0, 10, 10)], 0.2)
    assert (u1.track_id, u2.track_id) == (t2.track_id, t1.track_id) and not n1 and not n2
    ((v, nv),) = tr.update([(1, 0, 10, 10)], 1.0)  # after max_age the old track is gone
    assert nv and v.track_id not in (t1.track_id, t2.track_id)


def test_identity_clusters_join_and_split() -> None:
    c = IdentityClusters("face", max_distance=0.4, max_crops=2)
    a = np.array([1, 0, 0], np.float32)
    b = np.array([0, 1, 0], np.float32)
    a2 = np.array([0.99, 0.14, 0], np.float32) / np.linalg.norm([0.99, 0.14, 0])
    assert c.assign(a, 0.0) == ("face_1", True)
    assert c.assign(b, 1.0) == ("face_2", True)
    assert c.assign(a2, 2.0) == ("face_1", False)
    assert c.identities["face_1"].observation_count == 2 and c.identities["face_1"].last_seen == 2.0
    assert c.add_crop("face_1", 0.5, b"x") and c.add_crop("face_1", 0.9, b"y") and c.add_crop("face_1", 0.7, b"z")
    assert not c.add_crop("face_1", 0.1, b"w")
    assert c.identities["face_1"].best_crop() == b"y" and len(c.identities["face_1"].crops) == 2


def test_identity_clusters_centroid_joins_what_no_single_exemplar_reaches() -> None:
    a1 = np.array([1.0, 0.3, 0.0], np.float32)
    a2 = np.array([1.0, -0.3, 0.0], np.float32)
    q = np.array([1.0, 0.0, 0.25], np.float32)
    a1, a2, q = (v / np.linalg.norm(v) for v in (a1, a2, q))
    # q is 0.38 from each exemplar but 0.24 from their mean.
    for centroid, expected in ((False, ("face_2", True)), (True, ("face_1", False))):
        c = IdentityClusters("face", max_distance=0.3, centroid=centroid)
        assert c.assign(a1, 0.0) == ("face_1", True)
        c.add_exemplar(c.identities["face_1"], a2)
        assert c.assign(q, 1.0) == expected


def test_pipeline_stable_ids_and_reidentification(encoder: FaceEncoder, photos: dict[str, np.ndarray]) -> None:
    """Three people; a new identity waits for a second agreeing embedding; one leaves and comes back."""
    pipe = FacePipeline(encoder, FaceParams(reembed_every_n=3))
    frames: list[list] = []
    t = 0.0
    # 4 frames with all three, moving slightly.
    for i in range(4):
        pl = [("astronaut", 20 + 4 * i, 100, 1.0), ("hopper", 230, 60 + 3 * i, 0.7), ("cameraman", 440, 120, 1.0)]
        frames.append(pipe.process(compose(photos, pl), t))
        if i == 0:
            assert not pipe.clusters.identities
        t += 0.2
    # First frame: three faces, embedded, but nobody yet (a new identity needs two agreeing frames).
    assert len(frames[0]) == 3 and all(o.face_id == "" and o.embedding.size == 128 for o in frames[0])
    seen = [{o.face_id: o for o in obs} for obs in frames[1:]]
    first = seen[0]
    assert len(first) == 3 and set(first) == {"face_1", "face_2", "face_3"}
    assert all(o.new_identity for o in first.values())
    assert all(set(s) == set(first) for s in seen)
    by_track = {o.track_id: o.face_id for obs in frames[1:] for o in obs}
    assert len(by_track) == 3  # the tracker kept one track per person
    assert {o.track_id for o in frames[0]} == set(by_track)  # the pending frame's tracks got those ids
    ids = {}
    for fid, o in first.items():
        x = o.box[0]
        ids["astronaut" if x < 200 else "hopper" if x < 400 else "cameraman"] = fid
    # Astronaut leaves for 3 s (tracks expire), then returns on the right side at another scale.
    t += 3.0
    obs = pipe.process(compose(photos, [("astronaut", 400, 50, 1.2), ("hopper", 40, 200, 0.7)]), t)
    back = {("astronaut" if o.box[0] > 300 else "hopper"): o for o in obs}
    assert back["astronaut"].face_id == ids["astronaut"] and back["hopper"].face_id == ids["hopper"]
    assert back["astronaut"].embedding.size == 128  # new track → embedded on entry
    assert not any(o.new_identity for o in obs)
    assert len(pipe.clusters.identities) == 3
    # Crops kept per identity, best first.
    for ident in pipe.clusters.identities.values():
        assert ident.crops and ident.best_crop()[:2] == b"\xff\xd8"
    # A periodic re-embedding happened on tracked faces (entry + every 3rd frame).
    embedded = [o for obs in frames for o in obs if o.embedding.size]
    assert 3 < len(embedded) < 12


def test_person_swap_in_place_splits_the_track(encoder: FaceEncoder, photos: dict[str, np.ndarray]) -> None:
    """A cut where another person stands where the last one was: IoU alone would keep the track."""
    pipe = FacePipeline(encoder, FaceParams(reembed_every_n=100))
    hopper = compose(photos, [("hopper", 20, 60, 0.8)])
    astronaut = compose(photos, [("astronaut", 40, 60, 1.2)])
    a, b, c = (pipe.process(hopper, t) for t in (0.0, 0.2, 0.4))
    d, e = (pipe.process(astronaut, t) for t in (0.6, 0.8))
    assert len(a) == len(b) == len(c) == len(d) == len(e) == 1
    assert a[0].face_id == "" and b[0].face_id == "face_1" and b[0].new_identity  # confirmed on frame 2
    assert c[0].track_id == b[0].track_id == a[0].track_id and c[0].embedding.size == 0  # unchanged: not re-embedded
    # The cut: embedded at once, disagrees with face_1, so a new track, pending until a second frame agrees.
    assert d[0].embedding.size == 128 and d[0].track_id != a[0].track_id and d[0].face_id == ""
    assert e[0].track_id == d[0].track_id and e[0].face_id == "face_2" and e[0].new_identity


def test_disagreeing_reembedding_without_a_cut_keeps_the_id(
    encoder: FaceEncoder, photos: dict[str, np.ndarray]
) -> None:
    """A periodic re-embedding of the same tracked face that lands far from its exemplars (an atypical
    view) keeps the track's id and is not added as an exemplar."""
    pipe = FacePipeline(encoder, FaceParams(reembed_every_n=1, match_distance=0.4))
    img = compose(photos, [("cameraman", 100, 80, 1.0)])
    assert pipe.process(img, 0.0)[0].face_id == ""
    assert pipe.process(img, 0.2)[0].face_id == "face_1"
    ident = pipe.clusters.identities["face_1"]
    # The same face, but its identity's exemplars replaced by another person's: the next embedding
    # disagrees while the face's appearance has not changed.
    other = encoder.encode(compose(photos, [("astronaut", 40, 60, 1.0)]))[0].embedding
    ident.exemplars[:] = [other]
    (obs,) = pipe.process(img, 0.4)
    assert obs.embedding.size == 128 and obs.face_id == "face_1" and not obs.new_identity
    assert len(ident.exemplars) == 1 and len(pipe.clusters.identities) == 1
