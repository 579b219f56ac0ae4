"""Read rosbag2 recordings (MCAP or sqlite3) as raw CDR messages in time order.

A recording is read with the rosbags library's indexed reader. One that it refuses because a
storage file is damaged (an MCAP cut short has no summary or footer; an sqlite3 file cut short
has pages missing) is read by `salvage` up to its first bad record instead, so the intact part
still plays and replays. Either way a ReadStatus says how far a pass got, and which messages were
skipped because their CDR does not deserialize (or, counted by the caller, their content is bad).
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import yaml
from rosbags.rosbag2 import Reader, ReaderError
from rosbags.serde import SerdeError

from m3_agent.recording import salvage
from m3_agent.recording.typestore import m3_typestore

log = logging.getLogger(__name__)
WARN_EVERY_S = 5.0  # a warning per topic at most this often; every skip is counted
STORAGE_SUFFIXES = {".mcap": "mcap", ".db3": "sqlite3"}
# What rosbags' readers raise on a damaged record behind an intact index: its own error, SQLite's,
# and from its MCAP chunk parser a short read (struct) or a length that does not fit (Overflow).
INDEXED_READ_ERRORS = (ReaderError, apsw.Error, struct.error, OverflowError)


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
    damaged: str = ""  # why the indexed reader refused it; then the figures describe the readable part


@dataclass
class ReadStatus:
    """What one pass over a recording got: messages read, skipped per topic, where and why it stopped early."""

    messages_read: int = 0
    read_until_ns: int = 0  # newest timestamp read
    skipped: dict[str, int] = field(default_factory=dict)  # topic -> messages dropped
    truncated: bool = False  # the pass stopped before the end of the recording
    problem: str = ""  # what is wrong with the recording ("" = nothing)
    _warned_at: dict[str, float] = field(default_factory=dict, repr=False)

    def skip(self, topic: str, why: str, kind: str = "content") -> None:
        """Count a message that cannot be used; a warning per topic and kind of problem (CDR, content)
        names the first, then one per WARN_EVERY_S."""
        self.skipped[topic] = self.skipped.get(topic, 0) + 1
        now, key = time.monotonic(), f"{topic} {kind}"
        if now - self._warned_at.get(key, -WARN_EVERY_S) >= WARN_EVERY_S:
            self._warned_at[key] = now
            log.warning("skipping a message on %s (%d skipped so far): %s", topic, self.skipped[topic], why)

    def stop(self, problem: str) -> None:
        """The recording cannot be read further than this."""
        self.truncated = True
        self.problem = "; ".join(p for p in (self.problem, problem) if p)
        log.warning("recording damaged, reading only its intact part: %s", problem)

    def note(self, problem: str) -> None:
        """Something is wrong with the recording, but the pass read on past it."""
        self.problem = "; ".join(p for p in (self.problem, problem) if p)
        log.warning("recording damaged: %s", problem)

    def summary(self) -> dict:
        """The figures a command reports."""
        return {
            "skipped_messages": dict(self.skipped),
            "messages_read": self.messages_read,
            "bag_truncated": self.truncated,
            "bag_problem": self.problem,
        }

    def count(self, timestamp_ns: int) -> None:
        """One more message read."""
        self.messages_read += 1
        self.read_until_ns = max(self.read_until_ns, timestamp_ns)


class _Damaged(ValueError):
    """The indexed reader refused a recording whose storage files are known: they can be salvaged."""

    def __init__(self, message: str, storage: str, files: list[Path]) -> None:
        super().__init__(message)
        self.storage, self.files = storage, files


def _storage_files(path: Path) -> tuple[str, list[Path]] | None:
    """(storage id, files) from a bag directory's metadata.yaml or a lone .mcap/.db3; None if unknown."""
    if path.suffix in STORAGE_SUFFIXES and path.is_file():
        return STORAGE_SUFFIXES[path.suffix], [path]
    try:
        meta = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        storage, names = meta["storage_identifier"], meta["relative_file_paths"]
        compressed = (meta.get("compression_mode") or "none").lower() != "none"
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None
    files = [path / Path(name).name for name in names]
    if storage not in salvage.READERS or compressed or not all(f.is_file() for f in files):
        return None
    return storage, files


def open_reader(path: str | Path) -> Reader:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"recording not found: {path}")
    try:
        reader = Reader(path)
        reader.open()
    except Exception as error:  # whatever rosbags raises for a file it cannot open: salvage, or one clear line
        known = _storage_files(path)
        if known is not None:
            raise _Damaged(f"{path} is damaged ({error})", *known) from error
        raise ValueError(f"cannot read recording {path}: {error}") from error
    return reader


def _salvaged(damaged: _Damaged, on_stop: salvage.OnStop) -> Iterator[RawMessage]:
    """Every readable message of a damaged recording, file by file, each up to its first bad record."""
    for file in damaged.files:
        for topic, msgtype, timestamp, data in salvage.READERS[damaged.storage](file, on_stop):
            yield RawMessage(topic, msgtype, timestamp, data)


def _files_key(path: Path) -> tuple:
    files = [path] if path.is_file() else sorted(path.iterdir())
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


_scans: dict[tuple, BagInfo] = {}


def _scan(path: Path, damaged: _Damaged) -> BagInfo:
    """BagInfo of a damaged recording's readable part: one pass, remembered while its files are unchanged."""
    key = _files_key(path)
    if key not in _scans:
        counts: dict[str, tuple[str, int]] = {}
        start, end = None, 0
        for message in _salvaged(damaged, lambda _problem: None):
            counts[message.topic] = (message.msgtype, counts.get(message.topic, ("", 0))[1] + 1)
            start = message.timestamp_ns if start is None else min(start, message.timestamp_ns)
            end = max(end, message.timestamp_ns)
        if start is None:
            raise ValueError(f"cannot read recording {path}: no message is readable ({damaged})")
        if len(_scans) >= 8:
            _scans.clear()
        _scans[key] = BagInfo(path, (end + 1 - start) / 1e9, start, end + 1, counts, str(damaged))
    return _scans[key]


def bag_info(path: str | Path) -> BagInfo:
    path = Path(path)
    try:
        reader = open_reader(path)
    except _Damaged as damaged:
        return _scan(path, damaged)
    try:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        return BagInfo(path, reader.duration / 1e9, reader.start_time, reader.end_time, topics)
    finally:
        reader.close()


def iter_messages(
    path: str | Path,
    topics: list[str] | None = None,
    start_offset_s: float = 0.0,
    status: ReadStatus | None = None,
) -> Iterator[RawMessage]:
    """Messages of the chosen topics in timestamp order, skipping the first start_offset_s.

    A damaged recording yields its readable messages in file order and `status` says where it stopped."""
    status = status if status is not None else ReadStatus()
    try:
        reader = open_reader(path)
    except _Damaged as damaged:
        start = bag_info(path).start_ns + round(start_offset_s * 1e9) if start_offset_s > 0 else 0
        status.problem = str(damaged)
        for message in _salvaged(damaged, status.stop):
            if (topics is None or message.topic in topics) and message.timestamp_ns >= start:
                status.count(message.timestamp_ns)
                yield message
        return
    try:
        connections = [c for c in reader.connections if topics is None or c.topic in topics]
        messages = reader.messages(connections=connections, start=reader.start_time + round(start_offset_s * 1e9))
        read: dict[int, int] = {}  # connection id -> messages read
        while True:
            try:
                connection, timestamp, data = next(messages)
            except StopIteration:
                if start_offset_s <= 0:  # every message was due: the index says how many there are
                    _check_counts(path, connections, read, status)
                return
            except INDEXED_READ_ERRORS as error:  # a damaged record behind an intact index
                status.stop(f"{path}: unreadable after {status.read_until_ns / 1e9:.3f} s ({error})")
                return
            read[connection.id] = read.get(connection.id, 0) + 1
            status.count(timestamp)
            yield RawMessage(connection.topic, connection.msgtype, timestamp, bytes(data))
    finally:
        reader.close()


def _check_counts(path: str | Path, connections: list, read: dict[int, int], status: ReadStatus) -> None:
    """After a whole pass: a message the recording's index counts on a topic but the read did not yield
    (its record names a channel id the recording does not have - a corrupt id - so the reader passed over
    it) is counted as skipped and said in the bag problem, never dropped without a word."""
    missing, extra = [], []
    for connection in connections:
        got = read.get(connection.id, 0)
        if connection.msgcount == 0:
            continue  # a recording without per-topic counts: nothing to compare with
        for _ in range(connection.msgcount - got):  # read past, and skipped: as a message whose CDR is bad
            status.messages_read += 1
            status.skip(connection.topic, "a message record the index counts was not readable", kind="record")
        if got != connection.msgcount:
            (missing if got < connection.msgcount else extra).append(
                f"{connection.topic} {got} of {connection.msgcount}"
            )
    if missing or extra:
        what = f"read {'; '.join(missing + extra)} recorded messages"
        status.note(f"{path}: {what} (a message record with a corrupt channel id is not on its topic)")


def iter_deserialized(
    path: str | Path,
    topics: list[str] | None = None,
    start_offset_s: float = 0.0,
    status: ReadStatus | None = None,
    skip_messages: int = 0,
) -> Iterator[tuple[RawMessage, object | None]]:
    """(raw message, rosbags dataclass) pairs; a message whose CDR does not deserialize is skipped
    and counted in `status` (a subscriber could not use it either). A type the type store does not
    know cannot be checked: its messages come with None. `skip_messages`: the first that many
    messages after the offset are passed over unread (a resumed replay's position)."""
    status = status if status is not None else ReadStatus()
    store = m3_typestore()
    for position, message in enumerate(iter_messages(path, topics, start_offset_s, status)):
        if position < skip_messages:
            continue
        decoded = None
        if message.msgtype in store.types:
            try:
                decoded = store.deserialize_cdr(message.data, message.msgtype)
            except SerdeError as error:
                stamp_s = message.timestamp_ns / 1e9
                status.skip(message.topic, f"CDR does not deserialize at {stamp_s:.3f} s: {error}", kind="CDR")
                continue
        yield message, decoded


def deserialize(message: RawMessage):
    """The message as a rosbags dataclass (for inspection and tests; the player sends raw CDR)."""
    return m3_typestore().deserialize_cdr(message.data, message.msgtype)
