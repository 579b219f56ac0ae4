"""Every person drawn in a scripted episode shows a face the configured face encoder finds (real model),
and the photographs' embeddings tell the episode's people apart: what `m3 bench identity` matches faces by."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from m3_agent.bench.identity import photo_embeddings
from m3_agent.bringup import default_params_file
from m3_perception.perception_node import PARAMETERS
from m3_runtime.parameter_checks import node_parameters

EPISODES = sorted((Path(__file__).resolve().parents[1] / "m3_agent" / "demo" / "episodes").glob("*/*.yaml"))


@pytest.fixture(scope="module")
def params() -> dict:
    return node_parameters(default_params_file(), "perception_node", PARAMETERS)


@pytest.mark.parametrize("path", EPISODES, ids=[p.stem for p in EPISODES])
def test_each_drawn_person_has_a_face_of_their_own(path, params):
    script = yaml.safe_load(path.read_text())
    vectors = photo_embeddings(script, params)
    assert set(vectors) == {who for who, spec in script["people"].items() if spec.get("photo")}
    people = sorted(vectors)
    unit = np.stack([vectors[p] / np.linalg.norm(vectors[p]) for p in people])
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -1.0)
    assert similarity.max() < 0.9  # three different people, not one face thrice
