"""The milvus-lite server as the memory runs it. Killed while it writes an index file, it leaves a
collection that still loads (lite_launcher.py): the file cut short is built again from the segment, and
nothing stored is lost. Seen in CI: `m3 bench fleet` with a SIGKILL mid-flush, then every load_collection
failed with "No data left in file" although the rows were on disk. And `m3 memory milvus-server`, the
fleet's server started by hand, runs the same way and stops on Ctrl-C."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient
from pymilvus.exceptions import MilvusException

from m3_memory.milvus import lite_launcher
from m3_memory.milvus.server import (
    LAUNCHER,
    MilvusLiteServer,
    free_port,
    milvus_lite_command,
    port_open,
    server_command,
)

ROWS = 300


def fill(server: MilvusLiteServer, name: str, index_type: str) -> None:
    client = MilvusClient(uri=server.uri)
    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("key", DataType.INT64, is_primary=True)
    schema.add_field("kind", DataType.VARCHAR, max_length=16)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=8)
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type=index_type, metric_type="L2")
    index.add_index(field_name="kind", index_type="INVERTED")
    client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    vectors = np.random.default_rng(0).normal(size=(ROWS, 8)).astype(np.float32)
    rows = [{"key": i, "kind": "clip" if i % 3 else "entity", "vector": vectors[i].tolist()} for i in range(ROWS)]
    client.insert(name, rows)
    client.flush(name)
    client.release_collection(name)
    client.load_collection(name)  # the segment's index files are written by now
    client.close()


def count(server: MilvusLiteServer, name: str) -> int:
    client = MilvusClient(uri=server.uri)
    try:
        client.load_collection(name)
        return len(client.query(name, filter='kind == "clip"', output_fields=["key"], limit=1000))
    finally:
        client.close()


def sidecars(data_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(data_dir, "**", "indexes", "*.*idx"), recursive=True))


@pytest.mark.parametrize("index_type", ["FLAT", "HNSW"])
def test_an_index_file_cut_short_by_a_kill_is_built_again(tmp_path, index_type):
    data = str(tmp_path / "data")
    server = MilvusLiteServer(data).start()
    try:
        fill(server, "cut", index_type)
        server.stop(kill=True)
        files = sidecars(data)
        assert any(f.endswith(".idx") for f in files) and any(f.endswith(".sidx") for f in files), files
        whole = {path: os.path.getsize(path) for path in files}
        for path in files:  # as a SIGKILL in the middle of open(path, "wb") + write leaves them
            os.truncate(path, os.path.getsize(path) // 3)
        server.start()
        assert count(server, "cut") == 2 * ROWS // 3
        assert {path: os.path.getsize(path) for path in sidecars(data)} == whole  # written whole again
        server.stop(kill=True)
        server.start()  # and they load as they are now
        assert count(server, "cut") == 2 * ROWS // 3
    finally:
        server.stop()
    assert not glob.glob(os.path.join(data, "**", lite_launcher.STAGING_PREFIX + "*"), recursive=True)


def test_without_the_launcher_such_a_collection_no_longer_loads(tmp_path):
    """The failure the launcher prevents, on the plain `milvus-lite server` (this test fails once a later
    milvus-lite fixes it, and the launcher can go)."""
    data = str(tmp_path / "data")
    server = MilvusLiteServer(data).start()
    try:
        fill(server, "plain", "FLAT")
    finally:
        server.stop(kill=True)
    for path in sidecars(data):
        if path.endswith(".idx"):  # the vector index file, as in CI (the scalar one fails as "File is too small")
            os.truncate(path, 0)
    command = [milvus_lite_command(), "server", "--data-dir", data, "--host", "127.0.0.1", "--port", str(server.port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60.0
        while not port_open(server.port):
            assert process.poll() is None and time.monotonic() < deadline, "the plain server did not start"
            time.sleep(0.1)
        client = MilvusClient(uri=server.uri)
        with pytest.raises(MilvusException, match="No data left in file"):
            client.load_collection("plain")
        client.close()
    finally:
        process.kill()
        process.wait()


def test_the_launcher_runs_by_the_interpreter_of_milvus_lite():
    command = server_command()
    assert command[-1] == LAUNCHER and os.path.isfile(LAUNCHER) and os.access(command[0], os.X_OK)
    assert subprocess.run([*command, "server", "--help"], capture_output=True, timeout=60).returncode == 0


def test_a_staging_folder_left_by_a_kill_is_swept(tmp_path):
    folder = tmp_path / "data" / "c" / "partitions" / "_default" / "indexes" / (lite_launcher.STAGING_PREFIX + "x")
    folder.mkdir(parents=True)
    (folder / "seg.vector.flat.idx").write_bytes(b"\x93NUMPY")
    kept = tmp_path / "data" / "c" / "partitions" / "_default" / "indexes" / "seg.vector.flat.idx"
    kept.write_bytes(b"whole")
    lite_launcher.sweep_staging(str(tmp_path / "data"))
    assert not folder.exists() and kept.read_bytes() == b"whole"


def sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_m3_memory_milvus_server_serves_until_ctrl_c(tmp_path):
    port = free_port()
    command = [shutil.which("m3"), "memory", "milvus-server", str(tmp_path / "fleet"), "--port", str(port)]
    # Ctrl-C as in a terminal, also when the tests themselves run as a background job (SIGINT ignored there)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=sigint_default)
    try:
        started = json.loads(process.stdout.readline())
        assert started["uri"] == f"http://127.0.0.1:{port}"
        server = MilvusLiteServer(str(tmp_path / "fleet"), port)
        fill(server, "fleet", "FLAT")
        assert count(server, "fleet") == 2 * ROWS // 3
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert not port_open(port)  # its server went with it
    finally:
        process.kill()
        process.wait()
    refused = subprocess.run([*command[:4], "--port", "0"], capture_output=True, text=True)
    assert refused.returncode == 2 and "--port must be 1..65535" in refused.stderr
