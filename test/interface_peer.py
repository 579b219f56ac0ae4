"""The far side of test_interfaces_dds.py: a separate process that uses every kind of m3 interface.

- echoes VoiceSegment messages from /m3_test/voice_in to /m3_test/voice_out, transcript upper-cased;
- serves /m3_test/search_clip (SearchClip): one clip per requested top_k, echoing the query;
- serves /m3_test/instruct (Instruct): one feedback per round, then a result naming the rounds.
"""

import time

import rclpy
from rclpy.action import ActionServer
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from m3_interfaces.action import Instruct
from m3_interfaces.msg import ClipMemory, MemoryItem, PlanStep, VoiceSegment
from m3_interfaces.srv import SearchClip


class InterfacePeer(Node):
    def __init__(self) -> None:
        super().__init__("interface_peer")
        self._voice_out = self.create_publisher(VoiceSegment, "/m3_test/voice_out", 10)
        self.create_subscription(VoiceSegment, "/m3_test/voice_in", self._on_voice, 10)
        self.create_service(SearchClip, "/m3_test/search_clip", self._on_search_clip)
        ActionServer(self, Instruct, "/m3_test/instruct", self._execute)

    def _on_voice(self, msg: VoiceSegment) -> None:
        msg.transcript = msg.transcript.upper()
        self._voice_out.publish(msg)

    def _on_search_clip(self, request: SearchClip.Request, response: SearchClip.Response) -> SearchClip.Response:
        for index in range(request.top_k):
            item = MemoryItem(node_id=f"episodic_{index}", kind=MemoryItem.KIND_EPISODIC, text=request.query)
            response.clips.append(ClipMemory(clip_index=index, score=request.threshold, episodic=[item]))
        response.error_code = SearchClip.Response.OK
        return response

    def _execute(self, goal_handle) -> Instruct.Result:
        goal = goal_handle.request
        for round_index in range(1, goal.max_rounds + 1):
            goal_handle.publish_feedback(
                Instruct.Feedback(round=round_index, action="search", query=goal.instruction, hit_count=round_index)
            )
            time.sleep(0.05)
        goal_handle.succeed()
        return Instruct.Result(
            answer=f"answered '{goal.instruction}'",
            plan=[PlanStep(skill="say", target="user")],
            rounds_used=goal.max_rounds,
            error_code=Instruct.Result.SUCCEEDED,
        )


def main() -> None:
    rclpy.init()
    node = InterfacePeer()
    try:
        rclpy.spin(node, MultiThreadedExecutor())
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
