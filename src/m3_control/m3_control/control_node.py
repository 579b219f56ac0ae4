"""ROS 2 adapter of the control logic: the Instruct action server on /m3/instruct.

In the style of ros2/examples' action servers: goal, cancel and handle-accepted callbacks, an
execute callback publishing feedback every round, a ReentrantCallbackGroup on a
MultiThreadedExecutor. The reasoning itself is m3_control.loop (plain Python); this file only
declares parameters, converts messages, and applies the goal policy for concurrent goals:
  queue   - goals run one after the other in arrival order (ros2/examples queue server);
  reject  - a goal arriving while one runs is rejected (single-goal server);
  preempt - a new goal replaces the running one, which ends with PREEMPTED.
Memory is reached through a MemoryClient: by default the memory node's services
(ros_memory_client.py); the one-process bring-up injects a DirectMemoryClient over the memory
node's Memory object instead (m3_agent.bringup, `m3 run --memory-transport`).
"""

from __future__ import annotations

import collections
import os
import threading
import time

from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup

from m3_control.action_qos import server_qos
from m3_control.backends import make_reasoner
from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.loop import (
    CANCELED,
    INVALID_GOAL,
    PREEMPTED,
    SUCCEEDED,
    LoopConfig,
    LoopResult,
    RoundEvent,
    run_loop,
)
from m3_control.memory_client import MemoryClient, MemoryQueryRejected, MemoryUnavailable
from m3_control.nav_targets import with_targets
from m3_control.node_parameters import PARAMETERS
from m3_control.openai_reasoner import OpenAIConfig
from m3_control.reasoner import Reasoner
from m3_control.result_msgs import to_result
from m3_control.ros_memory_client import RosMemoryClient
from m3_control.second_opinion import ask_rules_when_unsure
from m3_control.skills import load_skills
from m3_control.view import ViewState, answer_now, view_question
from m3_control.view_input import ViewInput
from m3_interfaces.action import Instruct
from m3_memory.place.regions import Regions
from m3_memory.robot_ids import check_robot_id, robot_id_problem
from m3_memory.search.as_of import AsOfError, check_as_of, stamp_ns
from m3_runtime.managed_node import ManagedNode, run_node
from m3_runtime.parameter_checks import declare_checked

NODE_NAME = "control_node"
ACTION_NAME = "m3/instruct"  # relative: a robot namespace (__ns:=/robot_a) puts it under /robot_a
GOAL_POLICIES = ("queue", "reject", "preempt")
QUIESCE_S = 5.0  # deactivate waits this long for a running goal to end
# After a goal cut by a stop has returned, rclpy sends its result from a task on the executor (the result
# future's done callback), and the client's result request may still be on its way: the server stays up,
# spun, this long more. Without it a loaded machine could destroy the server first (a CI run's `m3 ask`).
RESULT_GRACE_S = 1.0


class ControlNode(ManagedNode):
    """Serves Instruct on /m3/instruct by running the retrieval-round loop over memory (services or injected).
    A managed node (m3_runtime.managed_node): the reasoner loads on configure, the action server goes
    live on activate; deactivate ends the running and queued goals (PREEMPTED) before it goes."""

    def __init__(self, memory_client: MemoryClient | None = None, reasoner: Reasoner | None = None, **kwargs) -> None:
        """memory_client: how memory is searched; None = the memory node's services under memory_prefix
        (ros_memory_client). reasoner: replaces the configured back-end (benchmarks inject a scripted one)."""
        super().__init__(NODE_NAME, **kwargs)
        declare_checked(self, PARAMETERS)  # a bad value or unknown name fails configure, never a traceback
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._injected_memory = memory_client
        self._injected_reasoner = reasoner
        self._group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self._active: ServerGoalHandle | None = None
        self._reserved = False  # reject policy: a goal was accepted and has not started yet
        self._queue: collections.deque[ServerGoalHandle] = collections.deque()
        self._preempted: set[bytes] = set()
        self._stopping = False  # deactivating: every goal ends PREEMPTED
        self._ros_memory: RosMemoryClient | None = None
        self.view: ViewInput | None = None

    def configure(self) -> None:
        policy = self.get_parameter("goal_policy").value
        if policy not in GOAL_POLICIES:
            raise ValueError(f"goal_policy {policy!r}: choose one of {list(GOAL_POLICIES)}")
        p = {name: self.get_parameter(name).value for name in PARAMETERS}
        self.skills = load_skills(p["skills_file"] or None)
        openai = OpenAIConfig(
            endpoint=p["endpoint"],
            model=p["model"],
            temperature=p["temperature"],
            top_p=p["top_p"],
            max_tokens=p["max_tokens"],
            timeout_s=p["timeout_s"],
            retries=p["retries"],
            reasks=p["reasks"],
            api_key=os.environ.get(p["api_key_env"], "") if p["api_key_env"] else "",
            stream=p["stream"],
            response_format=p["response_format"],
            knowledge=p["knowledge"],
            knowledge_limit=p["knowledge_limit"],
            prefetch=p["prefetch"],
        )
        reasoner = self._injected_reasoner
        if reasoner is None:
            self.reasoner, self.system_prompt = make_reasoner(
                p["backend"], self.skills, openai, p["system_prompt_file"], vllm_model=p["model"]
            )
        else:
            self.reasoner, self.system_prompt = reasoner, ""
        self.loop_config = dict(
            top_k=p["top_k"],
            threshold=p["threshold"],
            node_top_k=p["node_top_k"],
            max_instruction_chars=p["max_instruction_chars"],
            reasks=p["reasks"],
            robot_id=p["search_robot_id"] and check_robot_id(p["search_robot_id"]),  # a bad id fails configure
            utc_offset_s=p["utc_offset_s"],
        )
        self.default_max_rounds = p["default_max_rounds"]
        # a reasoner that only quotes memory (extractive) is the rules already
        self.rules_when_unsure = p["rules_when_unsure"] and not getattr(self.reasoner, "quotes_memory", False)
        view = ViewState(window_s=p["view_window_s"], max_age_s=p["view_max_age_s"])
        following = p["objects_topic"] or p["texts_topic"]
        self.view = ViewInput(self, p["objects_topic"], p["texts_topic"], view) if following else None
        path = p["regions_file"].strip()
        self.regions = Regions.load(os.path.expanduser(path)) if path else Regions.empty()  # bad file: configure fails
        if self._injected_memory is None:
            self._ros_memory = RosMemoryClient(self, p["memory_prefix"], p["memory_timeout_s"], self._group)
            self.memory: MemoryClient = self._ros_memory
            memory_text = f"memory services under {self._ros_memory.prefix}"
        else:
            self.memory = self._injected_memory
            memory_text = f"memory through {type(self.memory).__name__} (in this process, no services)"
        backend = p["backend"] if reasoner is None else type(reasoner).__name__
        scope = f"robot {p['search_robot_id']!r}" if p["search_robot_id"] else "every robot sharing it"
        self.get_logger().info(
            f"configured: backend {backend}, goal_policy {policy}, {memory_text}, searching the memories of {scope}"
        )

    def go_live(self) -> None:
        self._stopping = False
        for subscription in self.view.subscriptions(self._group) if self.view is not None else ():
            self.live(subscription)
        self.live(
            ActionServer(
                self,
                Instruct,
                ACTION_NAME,
                execute_callback=self._execute,
                goal_callback=self._on_goal,
                handle_accepted_callback=self._on_accepted,
                cancel_callback=self._on_cancel,
                callback_group=self._group,
                **server_qos(self.get_parameter("action_queue_depth").value),
            )
        )
        self.get_logger().info(f"serving {self.get_namespace().rstrip('/')}/{ACTION_NAME}")

    def quiesce(self) -> None:
        """Running and queued goals end PREEMPTED (the loop checks between rounds) and are answered before
        the server goes; the caller spins the executor meanwhile (node_shutdown.stop_executor)."""
        with self._lock:
            self._stopping = True
            cut = self._active is not None
        deadline = time.monotonic() + QUIESCE_S
        while self._active is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._active is not None:
            self.get_logger().warning(f"a goal still runs after {QUIESCE_S} s; the action server goes anyway")
        elif cut:
            time.sleep(RESULT_GRACE_S)  # the result goes out after the execute callback returns

    def release(self) -> None:
        if self._ros_memory is not None:
            self._ros_memory.destroy(self)
            self._ros_memory = None

    # --- parameters ----------------------------------------------------------------------------
    def _on_set_parameters(self, params) -> SetParametersResult:
        for param in params:
            if param.name == "goal_policy" and param.value not in GOAL_POLICIES:
                return SetParametersResult(successful=False, reason=f"goal_policy must be one of {GOAL_POLICIES}")
        return SetParametersResult(successful=True)

    @property
    def goal_policy(self) -> str:
        return self.get_parameter("goal_policy").value

    # --- goal life cycle -----------------------------------------------------------------------
    def _on_goal(self, goal: Instruct.Goal) -> GoalResponse:
        """Accept, or reject under the reject policy while busy. Invalid goals are accepted and end with
        INVALID_GOAL so that the client learns why (a rejection carries no message)."""
        self.get_logger().info(f"goal received: {goal.instruction[:80]!r} (max_rounds {goal.max_rounds})")
        with self._lock:
            if self.goal_policy == "reject":
                if self._active is not None or self._reserved or self._queue:
                    self.get_logger().info("goal rejected: another goal is running (goal_policy reject)")
                    return GoalResponse.REJECT
                self._reserved = True
        return GoalResponse.ACCEPT

    def _on_accepted(self, goal_handle: ServerGoalHandle) -> None:
        with self._lock:
            self._reserved = False
            if self._active is not None and self.goal_policy == "preempt":
                self._preempted.add(bytes(self._active.goal_id.uuid))
            elif self._active is not None:
                self._queue.append(goal_handle)
                return
            self._active = goal_handle
        goal_handle.execute()

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        return CancelResponse.ACCEPT

    def _finished(self, goal_handle: ServerGoalHandle) -> None:
        with self._lock:
            self._preempted.discard(bytes(goal_handle.goal_id.uuid))
            if self._active is not goal_handle:
                return  # preempted: the newer goal is already active
            self._active = self._queue.popleft() if self._queue else None
            next_goal = self._active
        if next_goal is not None:
            next_goal.execute()

    def _stop_reason(self, goal_handle: ServerGoalHandle) -> str | None:
        if goal_handle.is_cancel_requested:
            return CANCELED
        if self._stopping or bytes(goal_handle.goal_id.uuid) in self._preempted or not goal_handle.is_active:
            return PREEMPTED
        return None

    def _execute(self, goal_handle: ServerGoalHandle) -> Instruct.Result:
        try:
            outcome = self._run(goal_handle)
        except Exception as error:  # noqa: BLE001 - any bug still ends the goal with a named code
            self.get_logger().error(f"goal failed: {error!r}")
            outcome = LoopResult("INTERNAL_ERROR", error_message=f"{error.__class__.__name__}: {error}")
        result = to_result(outcome)
        if outcome.code == INVALID_GOAL:
            self.get_logger().warning(f"invalid goal: {outcome.error_message}", throttle_duration_sec=5.0)
        if outcome.code == SUCCEEDED:
            goal_handle.succeed()
        elif outcome.code == CANCELED and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        self.get_logger().info(f"goal ended {outcome.code} after {outcome.rounds_used} round(s)")
        self._finished(goal_handle)
        return result

    def _run(self, goal_handle: ServerGoalHandle) -> LoopResult:
        goal: Instruct.Goal = goal_handle.request
        if goal.max_rounds > 20:
            return LoopResult(INVALID_GOAL, error_message=f"max_rounds {goal.max_rounds} outside 1..20")
        try:  # before any search: an invalid limit would otherwise answer from memory refusing every query
            before_stamp_ns = stamp_ns(goal.before_stamp.sec, goal.before_stamp.nanosec)
            check_as_of(goal.before_clip, before_stamp_ns)
        except AsOfError as error:
            return LoopResult(INVALID_GOAL, error_message=str(error))
        if goal.robot_id and (problem := robot_id_problem(goal.robot_id)):
            return LoopResult(INVALID_GOAL, error_message=problem)
        if refused := self._robot_refused(goal.robot_id or self.loop_config["robot_id"]):
            return LoopResult(INVALID_GOAL, error_message=refused)
        now_asked = goal.before_clip == -1 and not before_stamp_ns  # an as-of goal asks about the past: memory
        if now_asked and self.view is not None and (question := view_question(goal.instruction)):
            return LoopResult(SUCCEEDED, answer=answer_now(question, self.view.state), answered_by="view")
        config = LoopConfig(
            max_rounds=goal.max_rounds or self.default_max_rounds,
            before_clip=goal.before_clip,
            before_stamp_ns=before_stamp_ns,
            # relative times ("this morning") count from the as-of time, else from now (sim time in a replay)
            asked_ns=before_stamp_ns or self.get_clock().now().nanoseconds,
            **{**self.loop_config, **({"robot_id": goal.robot_id} if goal.robot_id else {})},
        )

        def ask(reasoner: Reasoner, prompt: str, rounds_before: int = 0, held: list | None = None) -> LoopResult:
            """One run of the loop; its feedback is published, or kept in `held` when given."""

            def feedback(event: RoundEvent) -> None:
                n, action, query, hits = event.round + rounds_before, event.action, event.query, event.hit_count
                message = Instruct.Feedback(round=n, action=action, query=query, hit_count=hits)
                if held is None:
                    goal_handle.publish_feedback(message)
                else:
                    held.append(message)

            stop = lambda: self._stop_reason(goal_handle)  # noqa: E731
            return run_loop(goal.instruction, reasoner, self.memory, self.skills, config, prompt, feedback, stop)

        outcome = ask(self.reasoner, self.system_prompt)
        if self.rules_when_unsure:
            # the rules' rounds are fed back only when their answer is given (a check that keeps the model's
            # answer must not show the client rounds that did not answer it); they take milliseconds
            held: list = []
            rules = lambda: ask(ExtractiveReasoner(), "", outcome.rounds_used, held)  # noqa: E731
            outcome = ask_rules_when_unsure(goal.instruction, outcome, rules)
            if outcome.answered_by:
                for message in held:
                    goal_handle.publish_feedback(message)
                self.get_logger().info(f"the rules answered in the model's place: {outcome.answer!r}")
        if outcome.state is not None:
            evidence, names = outcome.state.evidence, outcome.state.names
            outcome.plan = with_targets(
                outcome.plan, evidence, names, self.regions, self._locate, lambda label: self._locate(label, True)
            )
        return outcome

    def _locate(self, name: str, thing: bool = False) -> tuple:
        """Where memory last observed an entity or named person, or (thing) last saw an object of a class
        (nav_targets); LookupError when it cannot say, with a warning when memory could not be asked (the
        step then keeps no pose)."""
        locate = getattr(self.memory, "locate_object" if thing else "locate_entity", None)
        if locate is None:
            raise LookupError("this memory client cannot locate people or things")
        try:
            return locate(name)
        except (MemoryUnavailable, MemoryQueryRejected) as error:
            self.get_logger().warning(f"navigate_to target {name!r} not located: {error}")
            raise LookupError(str(error)) from error

    def _robot_refused(self, robot_id: str) -> str:
        """Why memory refuses to search robot_id ("" when it does not, or cannot say now).

        One rule with the memory services (issue 21, D4): "" and memory's own robot id always search;
        another robot's id where memory has no fleet is INVALID_ARGUMENT there ("no fleet: ...") and
        INVALID_GOAL here, before the reasoner is asked, never "I don't know" from a memory refusing
        every search. Only memory knows whether it has a fleet, so it is asked: a search for people
        named in the id (kind person: no embedding, no Milvus search), through either transport.
        """
        if not robot_id:
            return ""
        try:
            self.memory.search_node(robot_id, ("person",), 1, robot_id=robot_id)
        except MemoryQueryRejected as error:
            return f"robot_id {robot_id!r} refused by memory: {error}"
        except MemoryUnavailable:
            return ""  # the loop reports MEMORY_UNAVAILABLE when it needs memory
        return ""


def main(args: list[str] | None = None) -> None:
    # Memory calls block the execute thread while their responses need another: keep threads to spare.
    raise SystemExit(run_node(ControlNode, NODE_NAME, args, threads=max(4, os.cpu_count() or 1)))


if __name__ == "__main__":
    main()
