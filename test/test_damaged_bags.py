"""Damaged recordings: corrupt messages are skipped and counted, truncated MCAP/sqlite3 bags replay
their intact part, and `m3 play` exits 0. Real bags from video2bag, damaged on disk, run through
the real `m3 replay` / `m3 play` commands."""

import json
import math
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import yaml

from m3_agent.bringup import default_params_file
from m3_agent.demo.generate import generate
from m3_agent.recording.bag_reader import bag_info, iter_messages
from m3_agent.recording.video2bag import ConversionOptions, convert

TWO_PEOPLE = Path(__file__).with_name("data") / "two_people.yaml"
IMAGES, AUDIO = "/camera/image_raw/compressed", "/audio"
CLIP_S = 4.0  # short clips: the 15 s episode makes 4 of them


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    """The two-people episode (15 s, people on camera throughout) as MCAP and sqlite3 bags, and a
    parameter file with 4 s clips that close on time (no close delay) and the small recogniser."""
    out = tmp_path_factory.mktemp("damaged")
    generate(out, TWO_PEOPLE)
    convert(out / "episode.mp4", out / "mcap")
    convert(out / "episode.mp4", out / "sqlite3", ConversionOptions(storage="sqlite3"))
    params = yaml.safe_load(Path(default_params_file()).read_text())
    params["memory_node"]["ros__parameters"]["clip_seconds"] = CLIP_S
    params["memory_node"]["ros__parameters"]["clip_close_delay"] = 0.0
    params["perception_node"]["ros__parameters"]["asr_model"] = "tiny.en"
    (out / "params.yaml").write_text(yaml.safe_dump(params))
    return out


def _copy(bag: Path, to: Path) -> tuple[Path, Path]:
    """A copy of the bag directory and its one storage file."""
    shutil.copytree(bag, to)
    return to, next(f for f in to.iterdir() if f.suffix in (".mcap", ".db3"))


def _sequence_length_at(cdr: bytes, after: bytes) -> int:
    """Offset of the uint8[] length field that follows the string `after` (4-byte aligned CDR)."""
    end = cdr.index(after + b"\x00") + len(after) + 1
    at = 4 + (end - 4 + 3) // 4 * 4
    assert struct.unpack_from("<I", cdr, at)[0] == len(cdr) - at - 4  # it is the data length
    return at


def _patch(storage: Path, cdr: bytes, at: int, new: bytes) -> None:
    """Overwrite bytes of one message's CDR inside the storage file (found by its unique first 96 bytes)."""
    blob = storage.read_bytes()
    assert blob.count(cdr[:96]) == 1 and at + len(new) <= 96
    start = blob.index(cdr[:96]) + at
    storage.write_bytes(blob[:start] + new + blob[start + len(new) :])


def _replay(bag: Path, memory: Path, params: Path) -> tuple[subprocess.CompletedProcess, dict]:
    command = ["m3", "replay", str(bag), "--memory", str(memory), "--params-file", str(params), "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]
    return result, json.loads(result.stdout.splitlines()[-1])


def _play(bag: Path) -> dict:
    command = ["m3", "play", str(bag), "--rate", "0", "--wait-for-subscribers", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    return json.loads(result.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def corrupt_bag(episode):
    """The MCAP bag with three messages damaged in the file: an image whose CDR does not deserialize
    (clip 1), an audio chunk whose CDR does not (clip 2), an image whose JPEG does not decode (clip 3)."""
    bag, storage = _copy(episode / "mcap", episode / "corrupt")
    images = [m.data for m in iter_messages(bag, [IMAGES])]
    audio = [m.data for m in iter_messages(bag, [AUDIO])]
    huge = struct.pack("<I", 0x7FFFFFF0)
    _patch(storage, images[25], _sequence_length_at(images[25], b"jpeg"), huge)  # 5.0 s
    _patch(storage, audio[90], _sequence_length_at(audio[90], b"wave"), huge)  # 9.0 s
    jpeg_at = _sequence_length_at(images[65], b"jpeg") + 4  # 13.0 s: the JPEG's SOI marker
    _patch(storage, images[65], jpeg_at, b"\x00\x00")
    return bag


def test_corrupt_messages_are_skipped_counted_and_the_replay_goes_on(episode, corrupt_bag, tmp_path):
    frames = bag_info(corrupt_bag).topics[IMAGES][1]
    result, report = _replay(corrupt_bag, tmp_path / "memory", episode / "params.yaml")
    assert report["skipped_messages"] == {IMAGES: 2, AUDIO: 1} and report["bad_messages"] == 3
    assert report["frames_processed"] == frames - 2
    assert report["clips_stored"] == math.ceil(bag_info(corrupt_bag).duration_s / CLIP_S)  # every clip
    assert not report["bag_truncated"] and report["bag_problem"] == ""
    assert f"skipping a message on {IMAGES}" in result.stderr and "CDR does not deserialize" in result.stderr
    assert "could not decode" in result.stderr
    _, again = _replay(corrupt_bag, tmp_path / "memory", episode / "params.yaml")  # a resume reads past them too
    assert again["clips_stored"] == 0 and again["resumed_from_clip"] == report["clips_stored"]


def test_the_player_skips_what_does_not_deserialize(corrupt_bag):
    played = _play(corrupt_bag)
    assert played["skipped_messages"] == {IMAGES: 1, AUDIO: 1}  # the undecodable JPEG is valid CDR: sent
    assert played["published"] == sum(n for _, n in bag_info(corrupt_bag).topics.values()) - 2


def test_a_corrupt_channel_id_is_counted_and_said_by_replay_and_play(episode, tmp_path):
    """Issue 21, D3: a message record whose channel id is corrupt was dropped without a count or a word
    (messages_read 2827 of 2828). Now it is a skipped message of its topic and a bag_problem."""
    bag, storage = _copy(episode / "mcap", tmp_path / "channel")
    cdr = [m.data for m in iter_messages(bag, [AUDIO])][50]
    blob = bytearray(storage.read_bytes())
    assert blob.count(cdr[:96]) == 1
    record = blob.index(cdr[:96]) - 22 - 9  # opcode, length, channel, sequence, log and publish time
    assert blob[record] == 0x05
    blob[record + 9 : record + 11] = b"\xff\xff"  # the uint16 channel id
    storage.write_bytes(bytes(blob))
    recorded = sum(n for _, n in bag_info(bag).topics.values())
    audio = bag_info(bag).topics[AUDIO][1]
    result, report = _replay(bag, tmp_path / "memory", episode / "params.yaml")
    assert report["skipped_messages"] == {AUDIO: 1} and report["messages_read"] == recorded
    assert f"read {AUDIO} {audio - 1} of {audio} recorded messages" in report["bag_problem"]
    assert not report["bag_truncated"] and "recording damaged" in result.stderr
    played = _play(bag)
    assert played["skipped_messages"] == {AUDIO: 1} and played["published"] == recorded - 1
    assert f"{AUDIO} {audio - 1} of {audio}" in played["bag_problem"]


def _cut(bag: Path, to: Path, fraction: float) -> Path:
    """A copy whose storage file is cut at `fraction` of its size (a recording that was never closed)."""
    bag, storage = _copy(bag, to)
    with storage.open("r+b") as file:
        file.truncate(int(storage.stat().st_size * fraction))
    return bag


@pytest.mark.parametrize(("storage", "damage"), [("mcap", "cut short"), ("sqlite3", "unreadable after")])
def test_a_truncated_bag_replays_its_intact_part(episode, tmp_path, storage, damage):
    full = bag_info(episode / storage)
    cut = _cut(episode / storage, tmp_path / "cut", 0.6)
    result, report = _replay(cut, tmp_path / "memory", episode / "params.yaml")
    assert report["bag_truncated"] and damage in report["bag_problem"]
    assert "recording damaged, reading only its intact part" in result.stderr
    recorded = sum(n for _, n in full.topics.values())
    assert 0.3 * recorded < report["messages_read"] < recorded
    assert 0.3 * full.duration_s < report["read_until_s"] < 0.9 * full.duration_s
    complete = int(report["read_until_s"] // CLIP_S)  # clips wholly before the cut: every one is stored
    assert complete <= report["clips_stored"] <= complete + 1  # and the last, partial one if it holds evidence
    played = _play(cut)
    assert played["bag_truncated"] and played["published"] == report["messages_read"]


@pytest.mark.parametrize("cut", [False, True], ids=["indexed", "cut-short"])
@pytest.mark.parametrize(("opcode", "length"), [(0x05, 2**40), (0x80, 2**64 - 1)], ids=["message", "unknown-record"])
def test_a_damaged_record_length_stops_the_read_there(episode, tmp_path, cut, opcode, length):
    """A record inside an MCAP chunk whose length runs past the chunk (a message record, or one of a
    type readers skip, with a length that does not even fit an index), in a file with its summary
    (rosbags' indexed reader) or cut short (the stream reader): the messages of the chunks before it
    are read, then the pass stops and says why; no OverflowError or desynchronised record escapes."""
    from m3_agent.recording.bag_reader import ReadStatus, iter_deserialized

    bag, storage = _copy(episode / "mcap", tmp_path / "framing")
    cdr = [m.data for m in iter_messages(bag)][150]
    blob = bytearray(storage.read_bytes())
    record = blob.index(cdr[:96]) - 22 - 9  # opcode, length, channel, sequence, log and publish time
    assert blob[record] == 0x05
    blob[record : record + 9] = struct.pack("<BQ", opcode, length)
    storage.write_bytes(bytes(blob[: round(len(blob) * 0.95)] if cut else blob))
    status = ReadStatus()
    read = sum(1 for _ in iter_deserialized(bag, status=status))
    assert 0 < read < 150 and status.messages_read == read and not status.skipped
    assert status.truncated and ("unreadable after" in status.problem or "bad or cut-short record" in status.problem)


def test_a_recorded_type_nobody_knows_is_passed_on_or_refused_clearly(episode, tmp_path):
    """A damaged file's own type name (read from its schema record) that neither the type store nor
    rclpy knows: its messages cannot be checked and come unchecked; the player refuses in one line."""
    from m3_agent.recording.bag_reader import iter_deserialized

    bag, storage = _copy(episode / "mcap", tmp_path / "renamed")
    blob = storage.read_bytes().replace(b"m3_interfaces/msg/AudioChunk", b"m3_interfaces/msg/AudioChunX")
    storage.write_bytes(blob[: round(len(blob) * 0.95)])  # cut short: the stream reader takes types from the file
    unchecked = [message.topic for message, decoded in iter_deserialized(bag) if decoded is None]
    assert unchecked and set(unchecked) == {AUDIO}
    command = ["m3", "play", str(bag), "--rate", "0", "--wait-for-subscribers", "0"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no message class for the recorded type 'm3_interfaces/msg/AudioChunX'" in result.stderr


def test_a_bag_with_nothing_readable_is_one_clear_error(episode, tmp_path):
    cut = _cut(episode / "mcap", tmp_path / "empty", 0.0001)  # the header only
    with pytest.raises(ValueError, match="no message is readable"):
        bag_info(cut)
    command = ["m3", "replay", str(cut), "--memory", str(tmp_path / "memory"), "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "m3 replay: error: cannot read recording" in result.stderr


def test_an_utterance_too_short_to_identify_does_not_lose_its_clip(episode, tmp_path):
    """A word too short to tell who spoke, before any voice is known, has no voice id (as the end of a
    recording cut mid-word can have): the memory node drops such a segment; the replay handed it to the
    memory, which refused the whole clip (clip 0 was never stored)."""
    generate(tmp_path, Path(__file__).with_name("data") / "short_first_word.yaml")
    convert(tmp_path / "episode.mp4", tmp_path / "bag")
    result, report = _replay(tmp_path / "bag", tmp_path / "memory", episode / "params.yaml")
    assert report["clips_stored"] == math.ceil(bag_info(tmp_path / "bag").duration_s / CLIP_S)
    assert "not stored" not in result.stderr


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_random_damage_never_escapes_the_reader(episode, tmp_path, storage):
    """Bytes overwritten at random (and half the time the file cut too): a pass reads what it can and
    says why it stopped, or the recording is refused with one clear error; nothing else escapes."""
    from m3_agent.recording.bag_reader import ReadStatus, iter_deserialized

    rng = random.Random(3)
    original = next(f for f in (episode / storage).iterdir() if f.suffix in (".mcap", ".db3"))
    clean = original.read_bytes()
    outcomes = {"read": 0, "truncated": 0, "refused": 0}
    for trial in range(60):
        bag, file = _copy(episode / storage, tmp_path / str(trial))
        data = bytearray(clean)
        for _ in range(rng.choice([30, 100, 300])):
            data[rng.randrange(len(data))] = rng.randrange(256)
        file.write_bytes(bytes(data[: rng.randrange(len(data))] if rng.random() < 0.5 else data))
        try:
            bag_info(bag)
            status = ReadStatus()
            yielded = sum(1 for _ in iter_deserialized(bag, status=status))
            assert yielded + sum(status.skipped.values()) == status.messages_read
            outcomes["truncated" if status.truncated else "read"] += 1
        except ValueError as error:
            assert "cannot read recording" in str(error)
            outcomes["refused"] += 1
        shutil.rmtree(bag)
    assert outcomes["truncated"] > 0 and outcomes["read"] > 0
