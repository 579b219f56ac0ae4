"""m3 replay: a generated episode → rosbag2 → perception + memory in one process → memory on disk."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from m3_agent.bringup import default_params_file
from m3_agent.demo.generate import generate
from m3_agent.demo.places import place_setup
from m3_agent.recording.bag_reader import bag_info
from m3_agent.recording.video2bag import ConversionOptions, convert

TWO_PEOPLE = Path(__file__).with_name("data") / "two_people.yaml"


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    """The two-room episode recorded with the robot's pose track (AMCL's topic)."""
    out = tmp_path_factory.mktemp("replay")
    generate(out, TWO_PEOPLE)
    convert(out / "episode.mp4", out / "bag", ConversionOptions(poses=place_setup(out)[0]))
    return out / "bag"


@pytest.fixture(scope="module")
def replayed(bag, tmp_path_factory):
    memory = tmp_path_factory.mktemp("memory") / "mem"
    places = [f"memory_node.{k}={v}" for k, v in place_setup(bag.parent)[1]["memory_node"].items()]
    result = subprocess.run(
        ["m3", "replay", str(bag), "--memory", str(memory), "--quiet", *(a for p in places for a in ("--set", p))],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return memory, json.loads(result.stdout.splitlines()[-1])


def test_replay_builds_a_memory_of_who_was_seen_and_said_what(bag, replayed):
    from m3_memory.store.sqlite_store import MemoryStore

    memory_dir, report = replayed
    assert report["clips_stored"] >= 1 and report["bad_messages"] == 0
    frames_in_bag = bag_info(bag).topics["/camera/image_raw/compressed"][1]
    assert report["frames_processed"] == frames_in_bag  # lossless: every 5 fps frame is processed
    store = MemoryStore(str(memory_dir), create=False)
    try:
        export = store.export_json()
        assert store.integrity_check() == []
    finally:
        store.close()
    faces = [e for e in export["entities"] if e["kind"] == "face"]
    assert len(faces) == 2  # two people on camera, each one face identity
    texts = [n["text"].lower() for n in export["text_nodes"]]
    assert any("kitchen drawer" in t for t in texts)
    assert any("green tea" in t for t in texts)
    assert "Alice" in {e["name"] for e in export["entities"] if e["kind"] == "person"}
    # the recorded pose track: what was said in the hall and in the living room knows which room
    region = {row["node_id"]: row["region"] for row in export["text_places"]}
    said = {n["text"]: region.get(n["node_id"]) for n in export["text_nodes"] if "says" in n["text"]}
    assert any("kitchen drawer" in t and r == "front hall" for t, r in said.items()), said
    assert any("green tea" in t and r == "living room" for t, r in said.items()), said
    assert export["clip_paths"]  # and each clip kept the robot's path


def test_replaying_again_resumes_and_adds_nothing(bag, replayed):
    memory_dir, first = replayed
    result = subprocess.run(
        ["m3", "replay", str(bag), "--memory", str(memory_dir), "--quiet"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    again = json.loads(result.stdout.splitlines()[-1])
    assert again["clips_stored"] == 0
    assert again["resumed_from_clip"] >= first["clips_stored"]


def test_unknown_parameter_in_yaml_is_refused(bag, tmp_path):
    params = yaml.safe_load(open(default_params_file()).read())
    params["perception_node"]["ros__parameters"]["face_rate"] = 5  # misspelt
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(params))
    result = subprocess.run(
        ["m3", "replay", str(bag), "--memory", str(tmp_path / "m"), "--params-file", str(bad), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 2
    why = "perception_node: cannot configure: unknown parameter 'face_rate' (did you mean 'face_rate_hz'?)"
    assert why in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]  # as m3 run says it


def test_eval_answers_the_episode_questions_through_the_action(bag, replayed, tmp_path):
    memory_dir, _ = replayed
    questions = bag.parent / "questions.json"
    episode_id = next(iter(json.loads(questions.read_text())))
    (tmp_path / "episodes" / episode_id).mkdir(parents=True)
    (tmp_path / "episodes" / episode_id / "memory").symlink_to(memory_dir)
    out = tmp_path / "results.jsonl"
    command = [
        "m3",
        "eval",
        "--annotations",
        str(questions),
        "--episodes",
        str(tmp_path / "episodes"),
        "--out",
        str(out),
        "--quiet",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["judge"] == "normalised-match" and summary["questions"] == 1
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["ground_truth"] == "kitchen drawer" and record["evidence"]
    assert record["verdict"] is ("kitchen drawer" in record["answer"].lower())
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)  # resumes: nothing asked again
    assert again.returncode == 0 and len(out.read_text().splitlines()) == 1


def _write_bag(path: Path, messages: list[tuple[float, str, object]]) -> None:
    """A rosbag2 of (log time [s], topic, message) with the m3 type store, like m3 video2bag writes."""
    from rosbags.rosbag2 import Writer

    from m3_agent.recording.typestore import AUDIO_CHUNK, COMPRESSED_IMAGE, m3_typestore

    store = m3_typestore()
    with Writer(path, version=9) as writer:
        image = writer.add_connection("/camera/image_raw/compressed", COMPRESSED_IMAGE, typestore=store)
        audio = writer.add_connection("/audio", AUDIO_CHUNK, typestore=store)
        for t, topic, msg in sorted(messages, key=lambda m: m[0]):
            connection, msgtype = (image, COMPRESSED_IMAGE) if topic == "image" else (audio, AUDIO_CHUNK)
            writer.write(connection, round(t * 1e9), store.serialize_cdr(msg, msgtype))


def _header(t: float):
    from m3_agent.recording.typestore import m3_typestore

    types = m3_typestore().types
    stamp = types["builtin_interfaces/msg/Time"](sec=int(t), nanosec=round(t % 1 * 1e9))
    return types["std_msgs/msg/Header"](stamp=stamp, frame_id="")


def _audio(t: float, data: bytes, rate: int = 16000):
    """An AudioChunk of S16LE mono bytes stamped t [s]."""
    import numpy as np

    from m3_agent.recording.typestore import AUDIO_CHUNK, m3_typestore

    return m3_typestore().types[AUDIO_CHUNK](_header(t), rate, 1, "S16LE", "wave", np.frombuffer(data, np.uint8))


def _replay_bag(bag: Path, memory: Path) -> tuple[object, dict]:
    """The replay's report and the memory's export after replaying `bag` in this process."""
    from m3_agent.replay import Replayer
    from m3_memory.store.sqlite_store import MemoryStore

    replayer = Replayer(memory, default_params_file())
    try:
        report = replayer.run(bag)
    finally:
        replayer.close()
    store = MemoryStore(str(memory), create=False)
    try:
        return report, store.export_json()
    finally:
        store.close()


def test_replay_counts_bad_messages_and_goes_on(tmp_path):
    """Issue 13's bad messages inside a recording are skipped and counted, as the nodes do: on main the
    999 999 937 Hz chunk raised MemoryError out of the replay."""
    import numpy as np

    from m3_agent.recording.typestore import COMPRESSED_IMAGE, m3_typestore
    from m3_perception.material.synthetic import compose, face_photos, jpeg_claiming, png_claiming, speak
    from m3_runtime.audio_codec import encode_s16le
    from m3_runtime.image_codec import encode_jpeg

    def image(t: float, data: bytes, fmt: str = "jpeg"):
        return m3_typestore().types[COMPRESSED_IMAGE](header=_header(t), format=fmt, data=np.frombuffer(data, np.uint8))

    audio = _audio

    frame = encode_jpeg(compose(face_photos(), [("astronaut", 200, 100, 1.0)]), 90)
    line = speak("my name is alice and i like green tea with honey", "slt")  # over 1 s: gets a voice id
    track = encode_s16le(np.concatenate([np.zeros(8000), line, np.zeros(24000)]))
    messages = [(k * 0.5, "image", image(k * 0.5, frame)) for k in range(int(len(track) / 32000 / 0.5))]
    messages += [(i / 32000, "audio", audio(i / 32000, track[i : i + 3200])) for i in range(0, len(track), 3200)]
    messages += [
        (0.75, "image", image(0.75, jpeg_claiming(30000, 30000))),
        (1.25, "image", image(1.25, png_claiming(60000, 60000), "png")),
        (1.75, "image", image(1e6, frame)),  # stamped 10^6 s ahead
        (0.15, "audio", audio(0.15, bytes(65536), rate=999_999_937)),
        (0.15, "audio", audio(0.15, bytes(65536), rate=1)),
        (0.25, "audio", audio(2**31 - 2.0, track)),  # the whole line, stamped just before Time's int32 end
    ]
    _write_bag(tmp_path / "bag", messages)
    report, export = _replay_bag(tmp_path / "bag", tmp_path / "memory")
    assert (report.bad_messages, report.utterances, report.clips_stored) == (6, 1, 1)
    assert [(c["clip_index"], c["start_ns"]) for c in export["clips"]] == [(0, 0)]
    assert all(0 <= n["start_ns"] <= n["end_ns"] < 10 * 10**9 for n in export["text_nodes"]), export["text_nodes"]
