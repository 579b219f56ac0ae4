"""Write small ONNX models for tests without the `onnx` package.

Why hand-written: real weights (buffalo_l, ERes2NetV2) are not available here, so tests build
stand-in models with the real input/output names and shapes. `torch.onnx.export` needs the
`onnx` package (torch 2.13 raises "Module onnx is not installed!" even with dynamo=False), which
is not installed, and onnxruntime cannot write models. ONNX files are plain protobuf, so this
module encodes the few messages a stand-in needs (ModelProto, GraphProto, NodeProto, TensorProto,
ValueInfoProto, AttributeProto) in protobuf's wire format; field numbers are those of onnx.proto.
onnxruntime loading the result is the check that the encoding is right.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

FLOAT, INT64 = 1, 7  # TensorProto.DataType
_DTYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _int(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, s: str) -> bytes:
    return _bytes(field, s.encode())


def tensor(name: str, array: np.ndarray) -> bytes:
    """TensorProto: dims=1, data_type=2, name=8, raw_data=9 (little endian)."""
    a = np.ascontiguousarray(array)
    msg = b"".join(_int(1, d) for d in a.shape)
    msg += _int(2, _DTYPES[a.dtype]) + _str(8, name) + _bytes(9, a.astype(a.dtype.newbyteorder("<")).tobytes())
    return msg


def value_info(name: str, shape: Sequence[int | str], elem_type: int = FLOAT) -> bytes:
    """ValueInfoProto name=1, type=2 → TypeProto.tensor_type=1 → elem_type=1, shape=2 → dim=1."""
    dims = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _str(2, d)) for d in shape)
    tensor_type = _int(1, elem_type) + _bytes(2, dims)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def attr_ints(name: str, values: Sequence[int]) -> bytes:
    """AttributeProto name=1, ints=8, type=20 (INTS=7)."""
    return _str(1, name) + b"".join(_int(8, v) for v in values) + _int(20, 7)


def attr_int(name: str, value: int) -> bytes:
    """AttributeProto name=1, i=3, type=20 (INT=2)."""
    return _str(1, name) + _int(3, value) + _int(20, 2)


def attr_float(name: str, value: float) -> bytes:
    """AttributeProto name=1, f=2 (fixed32), type=20 (FLOAT=1)."""
    return _str(1, name) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int(20, 1)


def node(op: str, inputs: Sequence[str], outputs: Sequence[str], *attrs: bytes, name: str = "") -> bytes:
    """NodeProto input=1, output=2, name=3, op_type=4, attribute=5."""
    msg = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs)
    msg += _str(3, name or f"{op}_{outputs[0]}") + _str(4, op)
    return msg + b"".join(_bytes(5, a) for a in attrs)


def model(
    nodes: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    initializers: Sequence[bytes] = (),
    opset: int = 13,
) -> bytes:
    """ModelProto ir_version=1, producer_name=2, graph=7, opset_import=8 (domain=1, version=2)."""
    graph = b"".join(_bytes(1, n) for n in nodes) + _str(2, "stand_in")
    graph += b"".join(_bytes(5, t) for t in initializers)
    graph += b"".join(_bytes(11, i) for i in inputs) + b"".join(_bytes(12, o) for o in outputs)
    return _int(1, 8) + _str(2, "m3_perception tests") + _bytes(7, graph) + _bytes(8, _str(1, "") + _int(2, opset))


def save(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
