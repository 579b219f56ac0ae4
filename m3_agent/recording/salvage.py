"""Read the intact part of a damaged rosbag2 storage file, in file order, up to its first bad record.

The indexed readers (rosbags) refuse an MCAP cut short, which has no summary or footer, and an
sqlite3 file cut short, whose pages past the cut are missing. A recording that crashed or was
copied incompletely still holds minutes of good messages before the cut; these readers stream
them: MCAP with the mcap library's StreamReader (a partial last chunk gives its complete records),
sqlite3 rows in insertion order until the first page that cannot be read. Plain module: no rclpy.
"""

from __future__ import annotations

import sqlite3
import struct
import zlib
from collections.abc import Callable, Iterator
from io import BytesIO
from pathlib import Path
from urllib.parse import quote

from backports.zstd import ZstdDecompressor, ZstdError
from mcap.data_stream import ReadDataStream
from mcap.exceptions import McapError, UnsupportedCompressionError
from mcap.opcode import Opcode
from mcap.records import Channel, Chunk, DataEnd, Footer, Message, Schema
from mcap.stream_reader import StreamReader

# A chunk that declares more than this is a damaged record, refused before decompressing it
# (rosbag2 writes 768 KiB chunks, rosbags 1 MiB).
MAX_CHUNK_BYTES = 256 * 2**20
# What the mcap library raises for a bad record: its own errors, a short read (struct), a bad
# string (UnicodeDecodeError is a ValueError) and a failed checksum (CRCValidationError, a ValueError).
MCAP_ERRORS = (McapError, struct.error, ValueError, ZstdError)

# (topic, message type, log time in ns, CDR bytes)
Salvaged = tuple[str, str, int, bytes]
OnStop = Callable[[str], None]


def _parse_records(data: bytes, partial: bool) -> list:
    """The schema, channel and message records of a chunk's records stream, each read from its own
    bytes, so that a damaged field cannot carry the reader into the next record (the mcap library's
    breakup_chunk can be, and then reads a length from the middle of a message). A record that runs
    past the end is where a partial chunk's data stops; in a whole chunk it is damage."""
    records: list = []
    at = 0
    while at < len(data):
        length = struct.unpack_from("<Q", data, at + 1)[0] if at + 9 <= len(data) else None
        if length is None or at + 9 + length > len(data):
            if partial:
                break
            raise ValueError(f"the record at byte {at} of the chunk runs past its end")
        stream = ReadDataStream(BytesIO(data[at + 9 : at + 9 + length]))
        if data[at] == Opcode.SCHEMA:
            records.append(Schema.read(stream))
        elif data[at] == Opcode.CHANNEL:
            records.append(Channel.read(stream))
        elif data[at] == Opcode.MESSAGE:
            records.append(Message.read(stream, length))
        at += 9 + length
    return records


def _chunk_records(chunk: Chunk, partial: bool) -> list:
    """The records of a chunk; of a partial one (the file ends inside it), its whole records."""
    if chunk.uncompressed_size > MAX_CHUNK_BYTES:
        raise ValueError(f"chunk declares {chunk.uncompressed_size} bytes (more than {MAX_CHUNK_BYTES})")
    if chunk.compression == "zstd":
        data = ZstdDecompressor().decompress(chunk.data, max_length=chunk.uncompressed_size)
    elif chunk.compression == "":
        data = chunk.data
    else:
        raise UnsupportedCompressionError(chunk.compression)
    if not partial and len(data) != chunk.uncompressed_size:
        raise ValueError(f"chunk holds {len(data)} bytes, declares {chunk.uncompressed_size}")
    if not partial and chunk.uncompressed_crc and zlib.crc32(data) != chunk.uncompressed_crc:
        raise ValueError("chunk checksum mismatch")
    return _parse_records(data, partial)


def _partial_chunk(path: Path, offset: int, size: int) -> list:
    """The whole records of the chunk that starts at `offset` if the file ends inside it, else none."""
    with path.open("rb") as file:
        file.seek(offset)
        head = file.read(9)
        if len(head) < 9 or head[0] != 0x06 or offset + 9 + struct.unpack_from("<Q", head, 1)[0] <= size:
            return []  # not a chunk, or a whole one that is damaged: nothing more to trust
        try:
            return _chunk_records(Chunk.read(ReadDataStream(file)), partial=True)
        except MCAP_ERRORS:
            return []


def mcap_messages(path: Path, on_stop: OnStop) -> Iterator[Salvaged]:
    """Messages of an MCAP file in file order (each chunk's in time order), up to its first bad record."""
    size = path.stat().st_size
    schemas: dict[int, str] = {}
    channels: dict[int, tuple[str, str]] = {}
    with path.open("rb") as file:
        records = StreamReader(file, emit_chunks=True, record_size_limit=size).records
        while True:
            offset = file.tell()  # the next record starts here
            try:
                record = next(records)
                inner = _chunk_records(record, partial=False) if isinstance(record, Chunk) else [record]
            except StopIteration:
                return
            except MCAP_ERRORS as error:
                inner = _partial_chunk(path, offset, size)
                if inner:
                    on_stop(f"{path.name}: cut short inside the chunk at byte {offset} of {size}")
                elif offset >= size:
                    on_stop(f"{path.name}: ends after {size} bytes, before its data end record (cut short)")
                    return
                else:
                    on_stop(f"{path.name}: bad or cut-short record at byte {offset} of {size} ({error!r})")
                    return
                record = None
            if isinstance(record, (DataEnd, Footer)):
                return  # the data section is complete; what follows is the summary
            messages = []
            for item in inner:
                if isinstance(item, Schema):
                    schemas[item.id] = item.name
                elif isinstance(item, Channel):
                    channels[item.id] = (item.topic, schemas.get(item.schema_id, ""))
                elif isinstance(item, Message) and item.channel_id in channels:
                    messages.append(item)
            for message in sorted(messages, key=lambda m: m.log_time):
                topic, msgtype = channels[message.channel_id]
                yield topic, msgtype, message.log_time, bytes(message.data)
            if record is None:
                return


def sqlite3_messages(path: Path, on_stop: OnStop) -> Iterator[Salvaged]:
    """Rows of a rosbag2 sqlite3 file in insertion order, up to the first that cannot be read."""
    db = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
    try:
        try:
            # SQLite refuses a file shorter than its header's page count unless writable_schema is on
            # (as its own .recover does); the connection is read-only, nothing is ever written.
            db.execute("PRAGMA writable_schema=ON")
            topics = {tid: (name, msgtype) for tid, name, msgtype in db.execute("SELECT id, name, type FROM topics")}
            rows = db.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY id")
        except sqlite3.DatabaseError as error:
            on_stop(f"{path.name}: its topics or messages table cannot be read ({error})")
            return
        read = 0
        while True:
            try:
                row = rows.fetchone()
            except sqlite3.DatabaseError as error:
                on_stop(f"{path.name}: unreadable after {read} rows ({error})")
                return
            if row is None:
                return
            topic_id, timestamp, data = row
            if not (isinstance(timestamp, int) and isinstance(data, bytes)):  # a damaged cell reads as another type
                on_stop(f"{path.name}: unreadable after {read} rows (row {read + 1} holds other types than recorded)")
                return
            read += 1
            if topic_id in topics:
                yield *topics[topic_id], timestamp, data
    finally:
        db.close()


READERS: dict[str, Callable[[Path, OnStop], Iterator[Salvaged]]] = {
    "mcap": mcap_messages,
    "sqlite3": sqlite3_messages,
}
