"""Read rosbag2 recordings (MCAP or sqlite3) as raw CDR messages in time order."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rosbags.rosbag2 import Reader

from m3_agent.recording.typestore import m3_typestore


@dataclass(frozen=True)
class RawMessage:
    topic: str
    msgtype: str
    timestamp_ns: int  # bag receive time (video2bag writes the header stamp here)
    data: bytes  # CDR, exactly as rclpy serialises it


@dataclass(frozen=True)
class BagInfo:
    path: Path
    duration_s: float
    start_ns: int
    end_ns: int
    topics: dict[str, tuple[str, int]]  # topic -> (message type, count)


def open_reader(path: str | Path) -> Reader:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"recording not found: {path}")
    try:
        reader = Reader(path)
        reader.open()
    except Exception as error:
        raise ValueError(f"cannot read recording {path}: {error}") from error
    return reader


def bag_info(path: str | Path) -> BagInfo:
    reader = open_reader(path)
    try:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        return BagInfo(Path(path), reader.duration / 1e9, reader.start_time, reader.end_time, topics)
    finally:
        reader.close()


def iter_messages(
    path: str | Path,
    topics: list[str] | None = None,
    start_offset_s: float = 0.0,
) -> Iterator[RawMessage]:
    """Messages of the chosen topics in timestamp order, skipping the first start_offset_s."""
    reader = open_reader(path)
    try:
        connections = [c for c in reader.connections if topics is None or c.topic in topics]
        start = reader.start_time + round(start_offset_s * 1e9)
        for connection, timestamp, data in reader.messages(connections=connections, start=start):
            yield RawMessage(connection.topic, connection.msgtype, timestamp, bytes(data))
    finally:
        reader.close()


def deserialize(message: RawMessage):
    """The message as a rosbags dataclass (for inspection and tests; the player sends raw CDR)."""
    return m3_typestore().deserialize_cdr(message.data, message.msgtype)
