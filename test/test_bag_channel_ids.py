"""Issue 21, D3: a message record whose channel id is corrupt was dropped without a count, a warning or a
bag_problem (only messages_read showed it). Now it is counted as skipped on the topic it was recorded on
and said in bag_problem, by the reader, `m3 play` and (test_damaged_bags) `m3 replay`. Real MCAP bags
written by rosbags, damaged on disk; `m3 play` as a subprocess."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
from pathlib import Path

import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from m3_agent.recording.bag_reader import ReadStatus, iter_deserialized
from m3_agent.recording.typestore import m3_typestore

pytestmark = pytest.mark.reliability
STRING = "std_msgs/msg/String"
TOPICS = ("/d3_chatter", "/d3_other")
COUNT = 20  # messages, alternating between the two topics


def _text(i: int) -> str:
    return f"message number {i:03d} " + "x" * 40  # unique: its CDR finds its record in the file


def write_bag(path: Path) -> Path:
    """A small MCAP bag (10 messages on each topic); returns its storage file."""
    store = m3_typestore()
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = [writer.add_connection(topic, STRING, typestore=store) for topic in TOPICS]
        for i in range(COUNT):
            cdr = store.serialize_cdr(store.types[STRING](data=_text(i)), STRING)
            writer.write(connections[i % 2], 1_000_000_000 + i * 100_000_000, cdr)
    return next(path.glob("*.mcap"))


def set_channel_id(storage: Path, i: int, channel_id: int) -> None:
    """Overwrite the channel id of message i's record: opcode 0x05, uint64 length, then uint16 channel id."""
    store = m3_typestore()
    blob = bytearray(storage.read_bytes())
    cdr = store.serialize_cdr(store.types[STRING](data=_text(i)), STRING)
    assert blob.count(cdr) == 1
    record = blob.index(cdr) - 22 - 9  # channel, sequence, log and publish time; opcode and length before
    assert blob[record] == 0x05
    blob[record + 9 : record + 11] = struct.pack("<H", channel_id)
    storage.write_bytes(bytes(blob))


def play(bag: Path) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "ROS_DOMAIN_ID": str(random.randint(120, 200)), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    command = ["m3", "play", str(bag), "--rate", "0", "--wait-for-subscribers", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return result, json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("channel_id", [0x7777, 0], ids=["unknown-id", "id-zero"])
def test_a_corrupt_channel_id_is_counted_and_said(tmp_path, channel_id):
    storage = write_bag(tmp_path / "bag")
    set_channel_id(storage, 7, channel_id)  # message 7 is on TOPICS[1]
    status = ReadStatus()
    read = sum(1 for _ in iter_deserialized(tmp_path / "bag", status=status))
    assert read == COUNT - 1 and status.messages_read == COUNT  # read past, and counted as skipped
    assert status.skipped == {TOPICS[1]: 1} and not status.truncated
    assert f"read {TOPICS[1]} 9 of 10 recorded messages" in status.problem and "corrupt channel id" in status.problem
    result, report = play(tmp_path / "bag")
    assert report["published"] == COUNT - 1 and report["messages_read"] == COUNT
    assert report["skipped_messages"] == {TOPICS[1]: 1} and not report["bag_truncated"]
    assert f"{TOPICS[1]} 9 of 10" in report["bag_problem"]
    assert "recording damaged" in result.stderr


def test_a_channel_id_turned_into_another_topics_is_said(tmp_path):
    """A flipped id that names the other channel moves the message to the wrong topic: both counts are off."""
    storage = write_bag(tmp_path / "bag")
    set_channel_id(storage, 7, 1)  # rosbags numbers the channels 1, 2: message 7 (TOPICS[1], id 2) now says 1
    status = ReadStatus()
    assert sum(1 for _ in iter_deserialized(tmp_path / "bag", status=status)) == COUNT
    assert f"{TOPICS[1]} 9 of 10" in status.problem and f"{TOPICS[0]} 11 of 10" in status.problem


def test_an_intact_bag_has_no_problem(tmp_path):
    write_bag(tmp_path / "bag")
    status = ReadStatus()
    assert sum(1 for _ in iter_deserialized(tmp_path / "bag", status=status)) == COUNT
    assert status.problem == "" and status.skipped == {}
    partial = ReadStatus()  # a pass from an offset cannot compare with the counts: it says nothing
    assert sum(1 for _ in iter_deserialized(tmp_path / "bag", start_offset_s=0.5, status=partial)) == COUNT - 5
    assert partial.problem == ""
