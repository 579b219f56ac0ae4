"""Play a recording to the running nodes over DDS (with /clock), then check the memory they built:
its identities, names and memories on disk, the memory services from another process, and an
answer from the control action."""

import json
import os
import signal
import subprocess
import threading
import time

import pytest
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from m3_agent.recording.player import BagPlayer, PlaybackOptions, spinning

SETTLE_S = 8.0  # no perception output for this long after playback: the nodes have caught up


def start_suite(memory_dir, *nodes: str, places: list[str] = ()) -> subprocess.Popen:
    """`m3 run` on simulated time; places: `--set` arguments for the pose topic and regions file."""
    args = [
        "m3",
        "run",
        *(arg for setting in places for arg in ("--set", setting)),
        "--set",
        f"memory_node.memory_dir={memory_dir}",
        "--set",
        "perception_node.image_transport=compressed",
        "--set",  # the player publishes reliably: with a reliable camera DDS loses no frame on a busy machine
        "perception_node.sensor_reliability=reliable",
        "--ros-args",
        "-p",
        "use_sim_time:=true",
    ]
    if nodes:
        args[2:2] = ["--nodes", *nodes]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop_suite(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGINT)  # the memory node stores its open clip on shutdown
    try:
        output, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output


def wait_for_service(node: Node, srv_type, name: str, timeout_s: float = 120.0):
    client = node.create_client(srv_type, name)
    assert client.wait_for_service(timeout_sec=timeout_s), f"{name} did not come up"
    return client


def call(client, request, timeout_s: float = 30.0):
    done = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _: done.set())
    assert done.wait(timeout_s), "service call timed out"
    return future.result()


def subscribe_to_perception(node: Node, on_faces, on_voices, depth: int) -> None:
    """Subscribe to perception's faces and voices and wait until perception's publishers are matched:
    a FaceTracks published before discovery reaches nobody."""
    from m3_interfaces.msg import FaceTracks, VoiceSegment

    qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
    subscriptions = [
        node.create_subscription(FaceTracks, "/m3/faces", on_faces, qos),
        node.create_subscription(VoiceSegment, "/m3/voices", on_voices, qos),
    ]
    deadline = time.monotonic() + 60
    while any(sub.get_publisher_count() == 0 for sub in subscriptions) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(sub.get_publisher_count() > 0 for sub in subscriptions), "perception's outputs never appeared"


def keep_up_options(rate: float) -> PlaybackOptions:
    """Playback paced on perception's progress (nothing dropped); rate 0: as fast as it keeps up."""
    return PlaybackOptions(
        rate=rate, wait_for_subscribers_s=60, keep_up_topic="/m3/perception/processed_until", keep_up_lead_s=0.25
    )


@pytest.fixture(scope="module")
def ros():
    rclpy.init()
    node = Node("bag_test_client")
    executor = MultiThreadedExecutor()
    executor.add_node(node)
    with spinning(executor):  # joined before teardown: a thread inside spin() at exit aborts pytest (134)
        yield node
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()


@pytest.fixture(scope="module")
def played_memory(ros, episode_bag, place_parameters, tmp_path_factory):
    """Play the bag in real time (paced on perception's progress, so a loaded machine drops nothing)
    to perception + memory (following the recorded pose topic) + control; stop them; return the memory dir."""
    from m3_interfaces.srv import GetStats

    memory_dir = tmp_path_factory.mktemp("bag_memory") / "memory"
    suite = start_suite(memory_dir, places=place_parameters)
    try:
        # Answered, not only discovered: the suite's executor is spinning.
        assert call(wait_for_service(ros, GetStats, "/m3/memory/get_stats"), GetStats.Request()).error_code == 0
        last_output = [time.monotonic()]
        counts = {"faces": 0, "voices": 0}

        def seen(kind):
            def callback(_msg):
                counts[kind] += 1
                last_output[0] = time.monotonic()

            return callback

        subscribe_to_perception(ros, seen("faces"), seen("voices"), depth=100)
        assert BagPlayer(ros, str(episode_bag), keep_up_options(rate=1.0)).play() > 0
        last_output[0] = time.monotonic()
        deadline = time.monotonic() + 180
        while time.monotonic() - last_output[0] < SETTLE_S and time.monotonic() < deadline:
            time.sleep(0.5)
        assert counts["faces"] > 0 and counts["voices"] == 4, counts  # one utterance per line of the script
    finally:
        log = stop_suite(suite)
    (memory_dir.parent / "suite.log").write_text(log)  # read it when a check below fails
    assert suite.returncode == 0, log[-3000:]
    return memory_dir


def test_memory_on_disk_has_the_people_their_names_and_what_they_said(played_memory):
    from m3_memory.store.sqlite_store import MemoryStore

    store = MemoryStore(str(played_memory), create=False)
    try:
        assert store.integrity_check() == []
        export = store.export_json()
    finally:
        store.close()
    faces = [e for e in export["entities"] if e["kind"] == "face"]
    assert len(faces) == 2, [f["entity_id"] for f in faces]  # Alice and Bob, one face identity each
    persons = {e["entity_id"]: e for e in export["entities"] if e["kind"] == "person"}
    said = [n["text"] for n in export["text_nodes"]]
    log = (played_memory.parent / "suite.log").read_text()
    assert "Alice" in {p["name"] for p in persons.values()}, (said, log[-4000:])
    texts = " ".join(n["text"].lower() for n in export["text_nodes"])
    assert "kitchen drawer" in texts and "green tea" in texts
    # Alice's face and her voice were united into one person by face-voice evidence
    alice = next(p for p in persons.values() if p["name"] == "Alice")
    members = {e["kind"] for e in export["entities"] if e.get("person_id") == alice["entity_id"]}
    assert members == {"face", "voice"}


def test_services_and_the_control_action_answer_from_that_memory(ros, played_memory):
    from m3_interfaces.srv import GetStats, SearchClip

    suite = start_suite(played_memory, "memory_node", "control_node")
    try:
        stats = call(wait_for_service(ros, GetStats, "/m3/memory/get_stats"), GetStats.Request())
        assert stats.error_code == GetStats.Response.OK and stats.clips >= 1 and stats.faces == 2
        search = wait_for_service(ros, SearchClip, "/m3/memory/search_clip")
        found = call(search, SearchClip.Request(query="where is the red folder", top_k=2, threshold=0.3))
        assert found.error_code == SearchClip.Response.OK and found.clips
        assert any("kitchen drawer" in item.text for item in found.clips[0].episodic + found.clips[0].semantic)
        asked = subprocess.run(
            ["m3", "ask", "Where did Alice put the red folder?", "--json", "--wait", "60"],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ},
        )
        assert asked.returncode == 0, asked.stderr
        answer = json.loads(asked.stdout.splitlines()[-1])
        assert "kitchen drawer" in answer["answer"].lower()
        assert answer["evidence_ids"]
    finally:
        stop_suite(suite)


def ask(question: str) -> dict:
    asked = subprocess.run(
        ["m3", "ask", question, "--json", "--wait", "60"], capture_output=True, text=True, timeout=180
    )
    assert asked.returncode == 0, asked.stderr
    return json.loads(asked.stdout.splitlines()[-1])


def test_memories_know_where_they_happened_and_plans_go_there(played_memory, place_parameters):
    """The robot greeted Alice in the front hall and moved to the living room (the recorded /amcl_pose):
    the memory node, live over DDS, labelled what was said with the room; the action answers where
    something was said and plans `navigate_to` with a pose from the regions file."""
    from m3_memory.store.sqlite_store import MemoryStore

    store = MemoryStore(str(played_memory), create=False)
    try:
        export = store.export_json()
    finally:
        store.close()
    region = {row["node_id"]: row["region"] for row in export["text_places"]}
    rooms = {n["text"]: region.get(n["node_id"]) for n in export["text_nodes"] if "says" in n["text"]}
    assert any("red folder" in text and room == "front hall" for text, room in rooms.items()), rooms
    assert any("black coffee" in text and room == "living room" for text, room in rooms.items()), rooms
    suite = start_suite(played_memory, "memory_node", "control_node", places=place_parameters)
    try:
        answer = ask("In which room did Bob say he likes black coffee?")
        assert "living room" in answer["answer"], answer
        plan = ask("Take me to the kitchen.")["plan"]
        steps = [s for s in plan if s["skill"] == "navigate_to"]
        assert steps and steps[0]["target_pose"]["frame_id"] == "map", plan
        pose = steps[0]["target_pose"]
        assert (pose["x"], pose["y"]) == (1.5, 5.0), pose  # the kitchen's centre
        assert pose["source"].startswith("region 'kitchen'"), pose
    finally:
        stop_suite(suite)


def test_keep_up_playback_is_as_fast_as_perception_and_drops_nothing(ros, episode_bag, tmp_path):
    from m3_agent.recording.bag_reader import bag_info
    from m3_interfaces.srv import GetStats

    suite = start_suite(tmp_path / "memory", "perception_node", "memory_node")
    try:
        wait_for_service(ros, GetStats, "/m3/memory/get_stats")
        tracks, voices = [], []
        subscribe_to_perception(ros, tracks.append, voices.append, depth=1000)
        player = BagPlayer(ros, str(episode_bag), keep_up_options(rate=0.0))
        player.play()
        # perception paces the play on its camera and microphone only: the pose track it does not take
        # (memory_node here follows none) must not let a second frame into its one-frame slot
        assert player.consumer_takes() == {"/camera/image_raw/compressed", "/audio"}
        frames = bag_info(episode_bag).topics["/camera/image_raw/compressed"][1]
        deadline = time.monotonic() + 60
        while (len(tracks) < frames or len(voices) < 4) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(tracks) == frames  # every frame reached face processing: none dropped
        assert len(voices) == 4  # every line of the script became one utterance
    finally:
        stop_suite(suite)
