"""The control node's view input: perception's objects and texts into a ViewState (view.py), so "Can you
see a cup?" is answered from what is in view now. A thin ROS adapter: messages become plain sightings."""

from __future__ import annotations

from rclpy.qos import qos_profile_sensor_data

from m3_control.view import Sighting, ViewState
from m3_interfaces.msg import ObjectTracks, TextRegions
from m3_memory.search.as_of import NS_PER_S


def _ns(stamp) -> int:
    """A message's stamp as nanoseconds, unchecked (as_of.stamp_ns refuses a bad one: a view keeps going)."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def object_sightings(msg: ObjectTracks) -> list[Sighting]:
    return [Sighting(o.object_id, o.label, float(o.confidence), _ns(o.last_seen), o.x, o.y) for o in msg.objects]


def text_sightings(msg: TextRegions) -> list[Sighting]:
    return [Sighting(r.region_id, r.text, float(r.confidence), _ns(r.last_seen), r.x, r.y) for r in msg.regions]


class ViewInput:
    """Subscribes perception's objects and texts topics (either may be empty: not followed)."""

    def __init__(self, node, objects_topic: str, texts_topic: str, state: ViewState) -> None:
        self.node, self.objects_topic, self.texts_topic, self.state = node, objects_topic, texts_topic, state

    def subscriptions(self, callback_group=None) -> list:
        """The subscriptions (the node owns them: ManagedNode.live). Sensor-data QoS (best effort, the
        newest few): it matches perception's reliable publishers, and only the newest image matters."""
        inputs = ((ObjectTracks, self.objects_topic, self._on_objects), (TextRegions, self.texts_topic, self._on_texts))
        return [
            self.node.create_subscription(kind, topic, callback, qos_profile_sensor_data, callback_group=callback_group)
            for kind, topic, callback in inputs
            if topic
        ]

    def _on_objects(self, msg: ObjectTracks) -> None:
        self.state.objects(_ns(msg.header.stamp), object_sightings(msg))

    def _on_texts(self, msg: TextRegions) -> None:
        self.state.texts(_ns(msg.header.stamp), text_sightings(msg))
