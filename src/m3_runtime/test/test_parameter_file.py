"""node_parameters: a node's section of a params file read as the node would be configured with it, for
code that runs a node's logic without the node (`m3 replay`, the benchmarks)."""

from __future__ import annotations

import pytest

from m3_memory.node_parameters import PARAMETERS
from m3_runtime.parameter_checks import ParameterError, node_parameters


def write(tmp_path, body: str):
    path = tmp_path / "params.yaml"
    path.write_text(body)
    return path


def test_an_integer_for_a_float_parameter_becomes_that_float(tmp_path):
    path = write(tmp_path, "memory_node:\n  ros__parameters:\n    clip_seconds: 20\n")
    values = node_parameters(path, "memory_node", PARAMETERS, {"face_match_threshold": 1})
    assert values["clip_seconds"] == 20.0 and isinstance(values["clip_seconds"], float)
    assert values["face_match_threshold"] == 1.0 and isinstance(values["face_match_threshold"], float)
    assert values["memory_backend"] == PARAMETERS["memory_backend"][0]  # the rest keep their defaults


@pytest.mark.parametrize(
    ("body", "overrides", "message"),
    [
        ("memory_node:\n  ros__parameters:\n    memroy_dir: /tmp/x\n", None, "did you mean 'memory_dir'"),
        ("memory_node:\n  ros__parameters:\n    clip_seconds: abc\n", None, "must be a float, got string"),
        ("memory_node:\n  ros__parameters:\n    clip_seconds: 0.0\n", None, "out of range"),
        ("memory_node: {}\n", {"clip_seconds": -3}, "out of range"),
    ],
)
def test_a_bad_name_type_or_value_is_refused_with_its_reason(tmp_path, body, overrides, message):
    with pytest.raises(ParameterError, match=message):
        node_parameters(write(tmp_path, body), "memory_node", PARAMETERS, overrides)
