"""The action's result as a message: a LoopResult as Instruct.Result, each plan step with its navigation pose."""

from __future__ import annotations

import math

from diagnostic_msgs.msg import KeyValue

from m3_control.loop import LoopResult
from m3_control.ros_memory_client import to_time
from m3_control.skills import Step
from m3_interfaces.action import Instruct
from m3_interfaces.msg import PlanStep


def plan_step(step: Step) -> PlanStep:
    """A Step as a PlanStep, with its navigation pose when memory or the regions file gave one."""
    msg = PlanStep(
        skill=step.skill, target=step.target, arguments=[KeyValue(key=k, value=v) for k, v in step.arguments.items()]
    )
    pose = step.pose
    if pose is not None:
        msg.target_pose.header.frame_id = pose.frame_id
        msg.target_pose.header.stamp = to_time(pose.stamp_ns)
        msg.target_pose.pose.position.x, msg.target_pose.pose.position.y = pose.x, pose.y
        msg.target_pose.pose.orientation.z = math.sin(pose.yaw / 2)
        msg.target_pose.pose.orientation.w = math.cos(pose.yaw / 2)
        msg.target_source, msg.target_evidence_id = pose.source, pose.evidence_id
    return msg


def to_result(outcome: LoopResult) -> Instruct.Result:
    """LoopResult -> Instruct.Result (error codes by constant name)."""
    return Instruct.Result(
        answer=outcome.answer,
        plan=[plan_step(s) for s in outcome.plan],
        evidence_ids=list(outcome.evidence_ids),
        rounds_used=min(outcome.rounds_used, 255),
        error_code=getattr(Instruct.Result, outcome.code),
        error_message=outcome.error_message,
        answered_by=outcome.answered_by,
    )
