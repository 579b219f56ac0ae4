"""A bag player node: publishes a recording's messages, with /clock, at a rate multiplier.

rosbag2's player has no PyPI wheel; this plays what `rosbags` reads, sending the raw CDR
bytes through rclpy so no message is re-encoded. A message whose CDR does not deserialize is
skipped and counted; a damaged recording plays up to its damage (see bag_reader).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock

from m3_agent.recording.bag_reader import ReadStatus, bag_info, iter_deserialized
from m3_runtime.stamps import StampRejected, header_ns

UNSUBSCRIBED_AFTER_S = 3.0  # discovery has settled by then: a topic still without a subscriber is said
CONSUMERS_REFRESH_S = 1.0  # how often keep-up looks up which played topics its consumer takes (discovery)


def message_class(msgtype: str) -> type:
    """'sensor_msgs/msg/CompressedImage' -> the generated rclpy class."""
    try:
        package, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ValueError, ImportError, AttributeError) as error:
        raise ValueError(
            f"no message class for the recorded type {msgtype!r}: build its package, or leave its topic out (--topics)"
        ) from error


@contextlib.contextmanager
def spinning(executor: Executor) -> Iterator[None]:
    """Spin `executor` on a thread for the duration of the block, and join that thread at its end.

    A thread still inside the executor when the interpreter exits aborts the process (SIGABRT,
    exit 134: what `m3 play` did with a daemon thread in executor.spin()); so spin in short steps
    and join before anything is torn down."""
    stop = threading.Event()

    def spin() -> None:
        try:
            while not stop.is_set() and executor.context.ok():
                executor.spin_once(timeout_sec=0.1)
        except ExternalShutdownException:  # Ctrl-C shut the context down
            pass

    thread = threading.Thread(target=spin, name="player_spin")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def parse_remaps(remaps: list[str]) -> dict[str, str]:
    """['/a:=/b'] -> {'/a': '/b'}; a clear error for anything else."""
    parsed = {}
    for remap in remaps:
        source, sep, target = remap.partition(":=")
        if not sep or not source.startswith("/") or not target.startswith("/"):
            raise ValueError(f"remap must look like /from:=/to, got {remap!r}")
        parsed[source] = target
    return parsed


@dataclass
class PlaybackOptions:
    rate: float = 1.0  # playback speed multiplier; 0 = as fast as possible
    start_offset_s: float = 0.0
    topics: list[str] | None = None  # None = every topic
    remaps: dict[str, str] = field(default_factory=dict)
    publish_clock: bool = True
    wait_for_subscribers_s: float = 0.0  # wait up to this long for every topic to have a subscriber
    # Keep-up mode: pace on a consumer's progress topic (rosgraph_msgs/Clock, e.g. perception's
    # /m3/perception/processed_until) and never lead it by more than keep_up_lead_s of stream time,
    # so nothing is dropped; with rate 0 that is "as fast as the nodes keep up". Needs the node spun.
    keep_up_topic: str = ""
    keep_up_lead_s: float = 0.25
    keep_up_timeout_s: float = 60.0

    def validate(self) -> None:
        if self.rate < 0 or self.rate > 1000:
            raise ValueError(f"rate must be within 0..1000 (0 = as fast as possible), got {self.rate}")
        if self.start_offset_s < 0:
            raise ValueError(f"start offset must be >= 0, got {self.start_offset_s}")
        if self.keep_up_lead_s <= 0 or self.keep_up_timeout_s <= 0:
            raise ValueError("keep-up lead and timeout must be > 0")


def keep_up_target(stamp_ns: int, lead_s: float, sent: dict[str, int], consumed: set[str] | None = None) -> int:
    """The consumer progress [ns] to wait for before sending a message recorded at stamp_ns: stamp - lead,
    but never past the last message sent on a topic the consumer takes (`consumed`; None: any topic), since
    its progress stops at each of its streams' last input. A topic it does not take must not lower the bar:
    a pose track sent every 0.5 s would let two camera frames be in flight, and the second would replace
    the first in the consumer's one-frame slot."""
    capped = [t for topic, t in sent.items() if consumed is None or topic in consumed]
    return min([stamp_ns - round(lead_s * 1e9), *capped])


def consumed_topics(consumers: set[tuple[str, str]], subscribers: dict[str, set[tuple[str, str]]]) -> set[str] | None:
    """The played topics (keys of `subscribers`: topic -> its subscribing nodes as (name, namespace)) that a
    consumer node (the publishers of the progress topic) subscribes to; None while no consumer is known."""
    if not consumers:
        return None
    return {topic for topic, nodes in subscribers.items() if nodes & consumers}


def stream_stamp_ns(msg, recorded_ns: int) -> int:
    """A message's header stamp (the stream time a consumer reports progress in), else its log time
    (no header, or a stamp no clock produces, which the consumer drops)."""
    header = getattr(msg, "header", None)
    if header is None:
        return recorded_ns
    try:
        return header_ns(int(header.stamp.sec), int(header.stamp.nanosec))
    except StampRejected:
        return recorded_ns


class BagPlayer:
    """Publishes one recording through `node`; call play() from any thread."""

    def __init__(self, node: Node, bag: str, options: PlaybackOptions) -> None:
        options.validate()
        self._node, self._bag, self._options = node, bag, options
        # Reliable, deep history: a subscriber that asks for reliability receives every message.
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        recorded = bag_info(bag).topics
        unknown = set(options.topics or ()) - set(recorded)
        if unknown:
            raise ValueError(f"topics not in {bag}: {sorted(unknown)}; it has {sorted(recorded)}")
        self._publishers = {
            topic: node.create_publisher(message_class(msgtype), options.remaps.get(topic, topic), qos)
            for topic, (msgtype, _) in recorded.items()
            if options.topics is None or topic in options.topics
        }
        self._clock = node.create_publisher(Clock, "/clock", 10) if options.publish_clock else None
        self.published = 0
        self.unsubscribed: list[str] | None = None  # said once, UNSUBSCRIBED_AFTER_S into the playback
        self.status = ReadStatus()  # messages skipped (CDR that does not deserialize), damage found
        self._progress_ns = -(2**62)  # no progress reported yet (stream stamps may start at 0)
        self._progress = threading.Condition()
        self._consumed: tuple[float, set[str] | None] = (float("-inf"), None)  # (looked up at, topics)
        if options.keep_up_topic:
            self._progress_sub = node.create_subscription(Clock, options.keep_up_topic, self._on_progress, 10)

    def _on_progress(self, message: Clock) -> None:
        with self._progress:
            self._progress_ns = max(self._progress_ns, message.clock.sec * 1_000_000_000 + message.clock.nanosec)
            self._progress.notify_all()

    def consumer_takes(self) -> set[str] | None:
        """consumed_topics from the ROS graph, looked up again after CONSUMERS_REFRESH_S (discovery goes on)."""
        looked_up, topics = self._consumed
        if time.monotonic() - looked_up < CONSUMERS_REFRESH_S:
            return topics
        graph = self._node
        consumers = {
            (i.node_name, i.node_namespace) for i in graph.get_publishers_info_by_topic(self._progress_sub.topic_name)
        }
        subscribers = {
            topic: {(i.node_name, i.node_namespace) for i in graph.get_subscriptions_info_by_topic(p.topic_name)}
            for topic, p in self._publishers.items()
        }
        topics = consumed_topics(consumers, subscribers)
        self._consumed = (time.monotonic(), topics)
        return topics

    def _keep_up(self, topic: str, stamp_ns: int, sent: dict[str, int], should_stop: Callable[[], bool]) -> bool:
        """Block until the consumer has processed up to stamp - lead (each topic's first message is free), but
        never past the last message sent on a topic it takes (`sent`, header stamps: what the consumer's
        progress counts in): a consumer holds its progress at each stream's last input, and a stream
        that stopped early must not stall the rest (keep_up_target).
        False when told to stop meanwhile (Ctrl-C)."""
        if topic not in sent:
            return True  # each topic's first message is free: the consumer reports nothing before input
        needed = keep_up_target(stamp_ns, self._options.keep_up_lead_s, sent, self.consumer_takes())
        deadline = time.monotonic() + self._options.keep_up_timeout_s
        with self._progress:
            while self._progress_ns < needed:
                if should_stop():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"no progress on {self._options.keep_up_topic} for {self._options.keep_up_timeout_s} s "
                        f"(processed until {self._progress_ns / 1e9:.2f} s, waiting for {needed / 1e9:.2f} s): "
                        "is the consumer running?"
                    )
                self._progress.wait(min(left, 0.1))
        return True

    def _wait_for_subscribers(self) -> None:
        deadline = time.monotonic() + self._options.wait_for_subscribers_s
        while time.monotonic() < deadline:
            if all(p.get_subscription_count() > 0 for p in self._publishers.values()):
                return
            time.sleep(0.05)

    def unsubscribed_topics(self) -> list[str]:
        """The topics being played that no subscriber takes (as the topic is published: after remapping)."""
        return sorted(p.topic_name for p in self._publishers.values() if p.get_subscription_count() == 0)

    def _say_unsubscribed(self) -> None:
        """One stderr line naming the played topics nobody subscribes to: a node listening on another
        topic (raw images while the recording has compressed ones) would otherwise get nothing silently."""
        self.unsubscribed = self.unsubscribed_topics()
        if self.unsubscribed:
            print(
                f"m3 play: nobody subscribes to {', '.join(self.unsubscribed)}: those messages go nowhere "
                "(a node configured for another topic or transport?)",
                file=sys.stderr,
                flush=True,
            )

    def play(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Publish the recording (paced, with /clock); the number of messages published. UNSUBSCRIBED_AFTER_S
        after the start (or at the end, if sooner) one line says which topics nobody subscribes to."""
        self._wait_for_subscribers()
        said_at = time.monotonic() + UNSUBSCRIBED_AFTER_S
        try:
            return self._play(should_stop, lambda: time.monotonic() >= said_at)
        finally:
            if self.unsubscribed is None and not should_stop():  # stopped (Ctrl-C): rclpy may be shut down
                self._say_unsubscribed()

    def _play(self, should_stop: Callable[[], bool], time_to_say: Callable[[], bool]) -> int:
        wall_start = first_ns = None
        sent: dict[str, int] = {}  # topic -> header stamp of the last message published on it
        topics, offset = self._options.topics, self._options.start_offset_s
        for message, msg in iter_deserialized(self._bag, topics, offset, self.status):  # checked, sent raw
            if first_ns is None:
                wall_start, first_ns = time.monotonic(), message.timestamp_ns
            keep_up = self._options.keep_up_topic
            if keep_up and not self._keep_up(message.topic, message.timestamp_ns, sent, should_stop):
                break
            if self._options.rate > 0:
                due = wall_start + (message.timestamp_ns - first_ns) / 1e9 / self._options.rate
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            if should_stop():
                break
            if self._clock is not None:
                clock = Clock()
                clock.clock.sec, clock.clock.nanosec = divmod(message.timestamp_ns, 1_000_000_000)
                self._clock.publish(clock)
            self._publishers[message.topic].publish(message.data)
            sent[message.topic] = stream_stamp_ns(msg, message.timestamp_ns)
            self.published += 1
            if self.unsubscribed is None and time_to_say():
                self._say_unsubscribed()
        return self.published
