"""The openai back-end's small-model mode against a local stand-in server: constrained JSON replies,
compact knowledge with names, prefetched searches, names in answers, cancellation mid-reply.
(test/test_llm_reasoner.py runs the same paths against a real model.)"""

from __future__ import annotations

import json
import threading
import time

import pytest
from fixtures import ChatServer, FakeMemory, _m

from m3_control.loop import LoopConfig, run_loop
from m3_control.memory_client import Memory
from m3_control.openai_reasoner import JSON_SYSTEM_PROMPT, OpenAIConfig, OpenAIReasoner, load_prompt
from m3_control.reply_parser import MalformedReply
from m3_control.skills import describe_skills, load_skills
from m3_control.structured import decision_schema, parse_any, parse_json_reply, response_format

SKILLS = load_skills()
PROMPT = load_prompt(JSON_SYSTEM_PROMPT, describe_skills(SKILLS))


def answer(text: str, plan: list | None = None) -> str:
    data = {"action": "answer", "answer": text}
    if plan is not None:
        data["plan"] = plan
    return json.dumps(data)


def ask(server: ChatServer, instruction: str, should_stop=None, memory=None, **overrides):
    settings = dict(
        endpoint=server.endpoint,
        model="m3-test",
        timeout_s=5,
        retries=0,
        response_format="json_object",
        knowledge="compact",
        knowledge_limit=4,
        prefetch=1,
    )
    settings.update(overrides)
    reasoner = OpenAIReasoner(OpenAIConfig(**settings), skills=SKILLS)
    memory = memory or FakeMemory()
    result = run_loop(instruction, reasoner, memory, SKILLS, LoopConfig(), PROMPT, should_stop=should_stop)
    return result, memory, reasoner


def test_schema_allows_a_plan_only_for_commands_and_only_answers_in_the_last_round():
    question = decision_schema(SKILLS, command=False, must_answer=False)
    search, answer_shape = question["anyOf"]
    assert search["properties"]["action"]["enum"] == ["search"] and "plan" not in answer_shape["properties"]
    command = decision_schema(SKILLS, command=True, must_answer=True)
    assert command["properties"]["action"]["enum"] == ["answer"]  # the last round cannot search
    steps = command["properties"]["plan"]["items"]["anyOf"]
    assert [s["properties"]["skill"]["enum"] for s in steps] == [[name] for name in SKILLS]
    pick = steps[list(SKILLS).index("pick")]["properties"]["arguments"]
    assert list(pick["properties"]) == ["from"] and pick["additionalProperties"] is False
    assert response_format("json_object", question) == {"type": "json_object", "schema": question}
    assert response_format("json_schema", question)["json_schema"]["schema"] == question
    assert response_format("none", question) is None
    with pytest.raises(ValueError, match="response_format"):
        response_format("grammar", question)


def test_without_skills_a_command_may_only_have_an_empty_plan():
    plan = decision_schema({}, command=True, must_answer=True)["properties"]["plan"]
    assert plan == {"type": "array", "maxItems": 0}  # never an empty anyOf, which no grammar can express


def test_json_replies_parse_and_broken_ones_are_malformed():
    search = parse_json_reply('{"action": "search", "query": "keys drawer"}')
    assert search.query == "keys drawer"
    reply = parse_json_reply('<think>short</think>{"action": "answer", "answer": "Bob", "plan": []}')
    assert reply.text == "Bob" and reply.plan == ()
    assert parse_any('{"action": "answer", "answer": "in the drawer"}').text == "in the drawer"
    assert parse_any("Action: [Answer]\nContent: in the drawer").text == "in the drawer"
    for bad in ('{"action": "answer", "answer": "in the dr', '{"action": "fly", "answer": "x"}', "[]", "no json"):
        with pytest.raises(MalformedReply):
            parse_json_reply(bad)


def test_prefetch_compact_knowledge_with_names_and_schema_in_the_request():
    with ChatServer([answer("In the drawer of the hallway.")]) as server:
        result, memory, reasoner = ask(server, "Where did Alice put the keys?")
    assert result.code == "SUCCEEDED", result.error_message
    assert result.rounds_used == 2 and reasoner.calls == 1  # round 1 searched without asking the model
    assert memory.calls[0][:4] == ("search_clip", "Where did Alice put the keys?", 3, 0.3)
    (request,) = server.requests
    assert request["stream"] is True
    assert request["response_format"]["type"] == "json_object"
    assert "plan" not in request["response_format"]["schema"]["anyOf"][1]["properties"]  # a question
    knowledge = request["messages"][-1]["content"]
    assert knowledge.startswith("Memories found:\n[clip ")
    assert "Alice put the car keys in the drawer of the hallway." in knowledge
    assert "<face_1>" not in knowledge and "is named" not in knowledge  # names instead of ids, no bookkeeping
    assert len(knowledge.splitlines()) <= 1 + 4
    assert request["messages"][-2] == {"role": "assistant", "content": json.dumps(
        {"action": "search", "query": "Where did Alice put the keys?"})}  # fmt: skip
    assert result.evidence_ids == ["episodic_3"]


def test_compact_knowledge_names_every_id_with_the_name_memory_holds_now():
    said = '<voice_4> says: "The spare blankets are in the wardrobe upstairs."'
    clips = [(0, [_m("episodic_1", "episodic", said, 0, ("voice_4",))])]
    clips += [(0, [_m("semantic_2", "semantic", "<voice_4> is called Nadja.", 0, ("voice_4",))])]  # misheard once
    memory = FakeMemory(clips, names={"voice_4": "Nadia"})  # the person's name now, after more votes
    with ChatServer([answer("in the wardrobe upstairs")]) as server:
        result, _, _ = ask(server, "Where are the spare blankets?", memory=memory)
    assert result.code == "SUCCEEDED", result.error_message
    knowledge = server.requests[0]["messages"][-1]["content"]
    assert 'Nadia says: "The spare blankets are in the wardrobe upstairs."' in knowledge
    assert "<voice_4>" not in knowledge and "Nadja" not in knowledge


def test_model_search_is_widened_and_shown_memories_are_not_repeated():
    script = [json.dumps({"action": "search", "query": "keys drawer hallway"}), answer("In the hallway drawer.")]
    with ChatServer(script) as server:
        result, memory, _ = ask(server, "Where did Alice put the keys?", knowledge_limit=8)
    assert result.code == "SUCCEEDED"
    assert memory.calls[-2][:4] == ("search_clip", "keys drawer hallway", 3, 0.3)
    first, second = (r["messages"][-1]["content"] for r in server.requests)
    assert "drawer of the hallway" in first and "drawer of the hallway" not in second


def test_command_schema_and_injected_step_still_rejected():
    injected = [{"skill": "hand_over", "target": "the stranger", "arguments": {"object": "keys"}}]
    good = [
        {"skill": "navigate_to", "target": "hallway", "arguments": {}},
        {"skill": "pick", "target": "keys", "arguments": {"from": "drawer"}},
        {"skill": "hand_over", "target": "me", "arguments": {"object": "keys"}},
    ]
    with ChatServer([answer("Bringing the keys.", injected), answer("Bringing you the keys.", good)]) as server:
        result, _, _ = ask(server, "Bring me the keys")
    assert result.code == "SUCCEEDED", result.error_message
    assert [s.skill for s in result.plan] == ["navigate_to", "pick", "hand_over"]
    assert "stranger" not in str(result.plan)
    assert "plan was rejected" in server.requests[1]["messages"][-1]["content"]
    assert "plan" in server.requests[0]["response_format"]["schema"]["anyOf"][1]["properties"]
    # The re-ask after a rejected plan is for an answer: searching the same words again cannot fix a plan
    # (a real 1.5B model did that, then gave up with "I don't know").
    reask = server.requests[1]["response_format"]["schema"]
    assert reask["properties"]["action"]["enum"] == ["answer"] and "plan" in reask["properties"]


def test_a_command_answer_that_does_not_name_what_it_picks_is_sent_back_once_for_its_text():
    plan = [
        {"skill": "navigate_to", "target": "kitchen", "arguments": {}},
        {"skill": "pick", "target": "black coffee", "arguments": {"from": "kitchen"}},
        {"skill": "hand_over", "target": "Bob", "arguments": {"object": "black coffee"}},
    ]
    vague = answer("I will bring Bob his usual drink.", plan)
    with ChatServer([vague, answer("I will bring Bob a black coffee.")]) as server:
        result, _, _ = ask(server, "Bring Bob his usual drink.")
    assert result.code == "SUCCEEDED" and result.answer == "I will bring Bob a black coffee.", result
    assert [s.skill for s in result.plan] == ["navigate_to", "pick", "hand_over"]  # the valid plan is kept
    assert "naming 'black coffee'" in server.requests[1]["messages"][-1]["content"]
    assert server.requests[1]["messages"][-2]["role"] == "user"  # the vague answer is not shown again
    text_only = server.requests[1]["response_format"]["schema"]
    assert text_only["properties"]["action"]["enum"] == ["answer"] and "plan" not in text_only["properties"]
    with ChatServer([vague, answer("I will bring Bob his usual drink.")]) as server:  # once: the next text stands
        result, _, _ = ask(server, "Bring Bob his usual drink.")
    assert result.code == "SUCCEEDED" and [s.target for s in result.plan][1] == "black coffee", result
    assert len(server.requests) == 2


def test_ids_left_in_an_answer_become_names():
    with ChatServer([answer("face_2 likes his coffee black.")]) as server:
        result, _, _ = ask(server, "How does Bob take his coffee?")
    assert result.answer == "Bob likes his coffee black."


def test_text_grammar_mode_sends_no_response_format():
    with ChatServer(["Action: [Answer]\nContent: In the drawer."]) as server:
        result, _, _ = ask(server, "Where are the keys?", response_format="none", knowledge="reference", prefetch=1)
    assert result.code == "SUCCEEDED" and result.answer == "In the drawer."  # the prefetched search found it
    assert "response_format" not in server.requests[0]


def test_cancel_mid_reply_returns_at_once_and_closes_the_stream():
    long_reply = answer("word " * 200)
    stop_at = time.monotonic() + 0.5
    with ChatServer([long_reply], chunk_s=0.05) as server:
        started = time.monotonic()
        result, _, _ = ask(
            server, "Where are the keys?", should_stop=lambda: "CANCELED" if time.monotonic() > stop_at else None
        )
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 3
        while server.stream_stopped == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert result.code == "CANCELED" and result.answer == ""
    assert elapsed < 1.5  # the whole reply would take 10 s
    assert server.stream_stopped == 1  # the stream was closed, so a real server stops generating


def test_a_streamed_reply_cut_short_is_asked_again_not_parsed():
    """A stream that ends before its finish_reason (llama-cpp-python's server cut the reasoner's answer
    whenever the memorizer sent a clip) is a transport failure: retried, and unparsed."""
    whole = answer("In the red drawer.")
    with ChatServer([("cut", whole[: len(whole) // 2]), whole]) as server:
        result, _, _ = ask(server, "Where are the keys?", retries=1)
    assert result.code == "SUCCEEDED" and result.answer == "In the red drawer."
    assert len(server.requests) == 2
    with ChatServer([("cut", whole)] * 2) as server:  # even a cut that happens to parse is not a reply
        result, _, _ = ask(server, "Where are the keys?", retries=1)
    assert result.code == "MODEL_UNREACHABLE" and "before it finished" in result.error_message


def test_unknown_settings_stop_at_construction():
    with pytest.raises(ValueError, match="knowledge"):
        OpenAIReasoner(OpenAIConfig(knowledge="everything"))
    with pytest.raises(ValueError, match="response_format"):
        OpenAIReasoner(OpenAIConfig(response_format="xml"))


def test_concurrent_callers_share_one_client():
    with ChatServer(responder=lambda body: answer("ok"), chunk_s=0.01) as server:
        reasoner = OpenAIReasoner(OpenAIConfig(endpoint=server.endpoint, response_format="json_object"), skills=SKILLS)
        replies: list[str] = []
        threads = [threading.Thread(target=lambda: replies.append(reasoner.complete([]))) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
    assert replies == [answer("ok")] * 3


def test_compact_knowledge_shows_a_question_line_with_its_reply():
    lines = [
        _m("episodic_1", "episodic", '<voice_1> says: "Where do we keep the spare hive frames?"', 0, ("voice_1",)),
        _m("episodic_2", "episodic", '<voice_2> says: "Stacked in the shed behind the compost heap."', 0, ("voice_2",)),
    ]
    lines += [_m(f"episodic_{i}", "episodic", f'<voice_2> says: "Frames and hives, note {i}."', 0) for i in range(3, 9)]
    memory = FakeMemory([(0, lines)], names={"voice_1": "Pia", "voice_2": "Oskar"})
    with ChatServer([answer("In the shed behind the compost heap.")]) as server:
        result, _, _ = ask(server, "Where are the spare hive frames kept?", memory=memory, knowledge_limit=1)
    assert result.code == "SUCCEEDED", result.error_message
    knowledge = server.requests[0]["messages"][-1]["content"]
    assert 'Pia says: "Where do we keep the spare hive frames?"' in knowledge
    assert 'Oskar says: "Stacked in the shed behind the compost heap."' in knowledge  # the reply, past the limit
    assert len(knowledge.splitlines()) == 1 + 2


def test_compact_knowledge_says_where_a_memory_happened():
    from m3_memory.graph.records import Place

    said = '<voice_1> says: "I will paint the fence on Sunday."'
    shed = Place("map", 5.0, 0.0, 0.0, "garden shed")
    clips = [(0, [Memory("episodic_1", "episodic", said, 0, entity_ids=("voice_1",), place=shed)])]
    with ChatServer([answer("In the garden shed.")]) as server:
        ask(server, "In which room did Oskar talk about the fence?", memory=FakeMemory(clips))
    knowledge = server.requests[0]["messages"][-1]["content"]
    assert '[clip 0, robot in the garden shed] <voice_1> says: "I will paint the fence on Sunday."' in knowledge
