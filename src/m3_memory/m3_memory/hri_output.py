"""REP-155 person output of the memory node (publish_hri): /humans/persons/tracked and /known
(hri_msgs/IdsList) and, latched per person, /humans/persons/<id>/name, face_id, voice_id and alias
(std_msgs/String). Made once in the node's __init__; updated after every stored clip."""

from __future__ import annotations

import threading

from builtin_interfaces.msg import Time
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Header, String

from m3_memory.hri_persons import PersonsSnapshot, persons_snapshot
from m3_memory.memory import Memory
from m3_runtime.optional_interfaces import hri_messages

LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)


class HriPersonsOutput:
    def __init__(self, node: Node, ids_list: type, memory: Memory) -> None:
        self.node = node
        self.ids_list = ids_list
        self.memory = memory
        self.pub_tracked = node.lifecycle_publisher(ids_list, "/humans/persons/tracked", LATCHED)
        self.pub_known = node.lifecycle_publisher(ids_list, "/humans/persons/known", LATCHED)
        self._topics: dict[str, object] = {}  # topic -> publisher, made when a value first exists
        self._sent: dict[str, str] = {}  # topic -> last value (latched: publish changes only)
        self._lock = threading.Lock()  # clips are stored on the memorizer's worker thread

    @classmethod
    def create(cls, node: Node, mode: str, memory: Memory | None) -> HriPersonsOutput | None:
        """None when REP-155 output is off (or the store is unavailable); MissingInterfaces when
        'enabled' without hri_msgs. Made on configure; go_live() publishes the persons already known."""
        messages = hri_messages(mode)
        if messages is None or memory is None:
            return None
        return cls(node, messages[0], memory)

    def go_live(self) -> None:
        """On activate: the persons of the memory as it is (an existing memory has some already)."""
        self.clip_stored([], Time())

    def close(self) -> None:
        """On cleanup: the per-person topics go with the node's configuration."""
        with self._lock:
            for publisher in self._topics.values():
                self.node.destroy_publisher(publisher)
            self._topics.clear()
            self._sent.clear()

    def clip_stored(self, entity_ids: list[str], stamp: Time) -> None:
        self.publish(persons_snapshot(self.memory.graph, entity_ids), stamp)

    def publish(self, snapshot: PersonsSnapshot, stamp: Time) -> None:
        with self._lock:
            self.pub_tracked.publish(self.ids_list(header=Header(stamp=stamp), ids=snapshot.tracked))
            self.pub_known.publish(self.ids_list(header=Header(stamp=stamp), ids=snapshot.known))
            for person in snapshot.persons:
                for name in ("name", "face_id", "voice_id"):
                    self._latch(f"/humans/persons/{person.person_id}/{name}", getattr(person, name))
            for old, new in snapshot.aliases.items():
                self._latch(f"/humans/persons/{old}/alias", new)

    def _latch(self, topic: str, value: str) -> None:
        if not value or self._sent.get(topic) == value:
            return
        if topic not in self._topics:
            # A plain publisher: made while active, and a lifecycle publisher made then would start disabled.
            self._topics[topic] = self.node.create_publisher(String, topic, LATCHED)
        self._topics[topic].publish(String(data=value))
        self._sent[topic] = value
