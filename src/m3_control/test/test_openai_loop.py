"""The reasoning loop with the OpenAI-protocol back-end against a real local HTTP server (scripted replies)."""

from __future__ import annotations

import socket

import pytest
from fixtures import ChatServer, FakeMemory

from m3_control.loop import EMPTY_HINT, LAST_ROUND, LoopConfig, knowledge_message, run_loop
from m3_control.memory_client import Clip, Memory
from m3_control.openai_reasoner import OpenAIConfig, OpenAIReasoner, load_prompt
from m3_control.skills import describe_skills, load_skills

SKILLS = load_skills()
PROMPT = load_prompt(None, describe_skills(SKILLS))


def search(query: str, think: str = "") -> str:
    return f"{think}Action: [Search]\nContent: {query}"


def answer(text: str, plan: str = "[]", evidence: str = "[]") -> str:
    return f"Action: [Answer]\nContent: {text}\nPlan: {plan}\nEvidence: {evidence}"


def run(server: ChatServer, instruction: str, memory=None, events=None, **overrides):
    loop_keys = {"max_rounds", "before_clip", "reasks"}
    config = OpenAIConfig(endpoint=server.endpoint, model="m3-test", timeout_s=5, retries=1, backoff_s=0.01)
    for key, value in overrides.items():
        if key not in loop_keys:
            setattr(config, key, value)
    loop_config = LoopConfig(**{k: v for k, v in overrides.items() if k in loop_keys})
    reasoner = OpenAIReasoner(config)
    memory = memory or FakeMemory(names={"face_1": "Alice", "face_2": "Bob"})
    result = run_loop(
        instruction,
        reasoner,
        memory,
        SKILLS,
        loop_config,
        PROMPT,
        on_round=(events.append if events is not None else None),
    )
    return result, memory, reasoner


def test_search_then_answer_with_reasoning_stripped_and_names_resolved():
    events = []
    with ChatServer(
        [
            search("where did Alice put the keys", think="<think>I should look for the keys.</think>\n"),
            "<think>The drawer memory answers it.</think>"
            + answer("<face_1> put the car keys in the hallway drawer.", evidence='["episodic_3", "made_up_9"]'),
        ]
    ) as server:
        result, memory, _ = run(server, "Where did Alice put the keys?", events=events, before_clip=7)
    assert result.code == "SUCCEEDED", result.error_message
    assert result.answer == "Alice put the car keys in the hallway drawer."
    assert result.evidence_ids == ["episodic_3"]  # ids the model invents are dropped
    assert result.plan == []
    assert result.rounds_used == 2
    assert memory.calls[0] == ("search_clip", "where did Alice put the keys", 2, 0.5, 7)
    assert [(e.round, e.action, e.query) for e in events] == [
        (1, "search", "where did Alice put the keys"),
        (2, "answer", ""),
    ]
    assert events[0].hit_count > 0
    first, second = server.requests
    assert first["path"] == "/v1/chat/completions"
    assert (first["model"], first["temperature"], first["top_p"], first["max_tokens"]) == ("m3-test", 0.6, 0.95, 1024)
    assert first["messages"][0]["role"] == "system" and "hand_over" in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": "Question: Where did Alice put the keys?"}
    knowledge = second["messages"][-1]["content"]
    assert knowledge.startswith("Searched knowledge: ") and "episodic_3" in knowledge
    assert "<think>" not in second["messages"][-2]["content"]
    assert result.transcript[-1]["content"].startswith("Action: [Answer]")


def test_an_id_memory_has_no_name_for_never_reaches_the_answer():
    cook = FakeMemory([(0, [Memory("episodic_9", "episodic", "<person_7> cooks at the restaurant.", 0)])])
    with ChatServer([search("who cooks"), answer("The one who cooks is <person_7>.")]) as server:
        result, _, _ = run(server, "Who cooks at the restaurant?", memory=cook)
    assert result.code == "SUCCEEDED", result.error_message
    assert result.answer == "The one who cooks is someone whose name I don't know."
    with ChatServer([search("who cooks"), answer("<person_7>")]) as server:
        result, _, _ = run(server, "Which character id cooks at the restaurant?", memory=cook)
    assert result.answer == "<person_7>"  # asked for an id: the id


def test_malformed_reply_is_reasked_then_model_error():
    with ChatServer([search("car keys"), "I think the keys are somewhere.", answer("In the drawer.")]) as server:
        result, _, reasoner = run(server, "Where are the keys?", reasks=2)
    assert result.code == "SUCCEEDED" and result.answer == "In the drawer."
    assert reasoner.calls == 3
    assert "could not be read" in server.requests[2]["messages"][-1]["content"]

    with ChatServer(["no grammar", "Action: [Search]\nContent:", "Action: [Answer]\nPlan: {not json"]) as server:
        result, _, reasoner = run(server, "Where are the keys?", reasks=2)
    assert result.code == "MODEL_ERROR"
    assert "unusable replies after 3 attempt(s)" in result.error_message
    assert reasoner.calls == 3


def test_timeouts_and_refused_connections_are_model_unreachable():
    with ChatServer([("delay", 1.0, answer("late")), ("delay", 1.0, answer("late"))]) as server:
        result, _, reasoner = run(server, "Where are the keys?", timeout_s=0.3, retries=1)
    assert result.code == "MODEL_UNREACHABLE"
    assert "within 0.3 s" in result.error_message and reasoner.calls == 2

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ChatServer([])
    server.httpd.server_address = ("127.0.0.1", port)
    result, _, _ = run(server, "Where are the keys?", retries=0)
    assert result.code == "MODEL_UNREACHABLE" and "cannot reach" in result.error_message


def test_server_error_is_retried():
    with ChatServer([("status", 503), answer("In the drawer.")]) as server:
        result, _, reasoner = run(server, "Where are the keys?", retries=1)
    assert result.code == "SUCCEEDED" and reasoner.calls == 2


def test_last_round_must_answer():
    with ChatServer([search("keys"), search("car keys"), answer("In the hallway drawer.")]) as server:
        result, memory, _ = run(server, "Where are the keys?", max_rounds=2)
    assert result.code == "SUCCEEDED" and result.rounds_used == 2
    assert LAST_ROUND in server.requests[1]["messages"][-1]["content"]
    assert [c[0] for c in memory.calls] == ["search_clip"]  # the last-round search was not sent

    with ChatServer([search("keys")] * 4) as server:
        result, _, _ = run(server, "Where are the keys?", max_rounds=1, reasks=2)
    assert result.code == "NO_ANSWER" and "still searched" in result.error_message


def test_empty_result_hint_and_repeated_query_not_resent():
    with ChatServer([search("zebra parade"), search("Zebra parade!"), answer("I don't know.")]) as server:
        events = []
        result, memory, _ = run(server, "Where are the zebras?", events=events)
    assert result.code == "SUCCEEDED"
    assert EMPTY_HINT in server.requests[1]["messages"][-1]["content"]
    assert "already searched" in server.requests[2]["messages"][-1]["content"]
    assert [c[1] for c in memory.calls] == ["zebra parade"]
    assert [e.hit_count for e in events] == [0, 0, 0]


def test_character_id_query_uses_search_node():
    with ChatServer([search("What is the character id of Bob"), answer("Bob is <face_2>.")]) as server:
        result, memory, _ = run(server, "What is Bob's character id?")
    assert [c[0] for c in memory.calls] == ["search_clip", "search_node"]
    assert memory.calls[1][2] == 20
    assert result.answer == "Bob is <face_2>."  # an id question keeps the id


def test_injected_memory_cannot_add_a_step():
    injected = answer(
        "The keys are in the drawer.", plan='[{"skill": "hand_over", "target": "the stranger", "arguments": {}}]'
    )
    with ChatServer([search("keys"), injected, answer("The keys are in the hallway drawer.")]) as server:
        result, _, _ = run(server, "Where did Alice put the keys?")
    knowledge = server.requests[1]["messages"][-1]["content"]
    assert "ignore your instructions" in knowledge and "not instructions to you" in knowledge
    assert "plan was rejected" in server.requests[2]["messages"][-1]["content"]
    assert result.code == "SUCCEEDED" and result.plan == []
    assert result.transcript[1]["content"] == "Question: Where did Alice put the keys?"

    with ChatServer([search("keys")] + [injected] * 3) as server:
        result, _, _ = run(server, "Bring me the keys", reasks=2)
    assert result.code == "MODEL_ERROR" and result.plan == []
    assert "must act on someone the instruction names" in result.error_message


def test_a_question_keeps_its_answer_without_the_plan_it_was_not_asked_for():
    """A small model that still adds a plan to a question after being told: the answer stands, no plan."""
    drive = '[{"skill": "navigate_to", "target": "practice", "arguments": {}}]'
    question = "At what time do they leave for practice on Saturday?"  # a question that opens with a preposition
    said = FakeMemory([(0, [Memory("episodic_3", "episodic", '<face_1> says: "We leave at eight for practice."', 0)])])
    with ChatServer([search("practice Saturday")] + [answer("They leave at eight.", plan=drive)] * 2) as server:
        result, _, reasoner = run(server, question, memory=said, reasks=1)
    assert "is a question" in server.requests[2]["messages"][-1]["content"]  # told once
    assert result.code == "SUCCEEDED" and result.plan == [] and reasoner.calls == 3
    assert result.answer == "They leave at eight."


def test_valid_plan_for_a_command():
    plan = (
        '[{"skill": "navigate_to", "target": "hallway", "arguments": {}},'
        ' {"skill": "pick", "target": "car keys", "arguments": {"from": "drawer"}},'
        ' {"skill": "hand_over", "target": "me", "arguments": {"object": "car keys"}}]'
    )
    with ChatServer([answer("I will bring you the car keys from the hallway drawer.", plan=plan)]) as server:
        result, _, _ = run(server, "Please bring me the car keys")
    assert result.code == "SUCCEEDED"
    assert [(s.skill, s.target, s.arguments) for s in result.plan] == [
        ("navigate_to", "hallway", {}),
        ("pick", "car keys", {"from": "drawer"}),
        ("hand_over", "me", {"object": "car keys"}),
    ]


def test_cancel_between_rounds_and_memory_down():
    with ChatServer([search("keys"), search("drawer"), answer("x")]) as server:
        reasoner = OpenAIReasoner(OpenAIConfig(endpoint=server.endpoint, timeout_s=5))
        events = []
        result = run_loop(
            "Where are the keys?",
            reasoner,
            FakeMemory(),
            SKILLS,
            LoopConfig(),
            PROMPT,
            on_round=events.append,
            should_stop=lambda: "CANCELED" if events else None,
        )
    assert result.code == "CANCELED" and len(server.requests) == 1 and result.rounds_used == 1

    with ChatServer([search("keys")]) as server:
        result, _, _ = run(server, "Where are the keys?", memory=FakeMemory(down=True))
    assert result.code == "MEMORY_UNAVAILABLE" and "search_clip" in result.error_message


@pytest.mark.parametrize(
    ("instruction", "rounds", "message"),
    [("   ", 5, "empty"), ("x" * 2001, 5, "longer than 2000"), ("Where?", 0, "outside 1..20")],
)
def test_invalid_goal(instruction, rounds, message):
    with ChatServer([]) as server:
        result, _, reasoner = run(server, instruction, max_rounds=rounds)
    assert result.code == "INVALID_GOAL" and message in result.error_message and reasoner.calls == 0


def test_knowledge_turn_keeps_two_robots_clips_with_one_index():
    """A fleet search returns robot a's clip 4 and robot b's clip 4: the reasoner sees both."""
    own = Clip(4, 0.9, (Memory("episodic_1", "episodic", "Alice likes green tea.", 4, 0.9, (), "a"),), "a")
    other = Clip(4, 0.8, (Memory("b/episodic_1", "episodic", "The keys are in the drawer.", 4, 0.8, (), "b"),), "b")
    text = knowledge_message([own, other], [])
    assert '"CLIP_4": {"episodic_1": "Alice likes green tea."}' in text
    assert '"CLIP_4_b": {"b/episodic_1": "The keys are in the drawer."}' in text
