"""The `vllm` back-end against a stand-in `vllm` module.

vLLM could NOT run here: it is not installed and there is no GPU. These tests put a stand-in module
into sys.modules whose `LLM` and `SamplingParams` have the signatures of vLLM's documented offline
chat API (docs.vllm.ai "LLM Class"; examples/offline_inference/chat.py: `LLM(model=...)`,
`SamplingParams(temperature=..., top_p=..., max_tokens=...)`, `llm.chat(messages,
sampling_params=..., use_tqdm=False)` -> list of RequestOutput whose `.outputs[0].text` is the reply).
They prove what the reasoner hands the engine (weights directory, sampling parameters, the chat
messages of each round), that replies go through the openai back-end's grammar and re-ask policy,
and that engine failures become MODEL_ERROR. They do not prove that a real vLLM engine accepts these
calls or that M3-Agent-Control answers well.
"""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass, field
from typing import ClassVar

import pytest
from fixtures import FakeMemory

from m3_control.backends import make_reasoner
from m3_control.loop import LoopConfig, run_loop
from m3_control.openai_reasoner import OpenAIConfig
from m3_control.reasoner import MODEL_ERROR, LoopState, ReasonerError
from m3_control.reply_parser import parse_reply
from m3_control.skills import load_skills
from m3_control.vllm_reasoner import VLLMConfig, VLLMReasoner

SKILLS = load_skills()
ROLES = {"system", "user", "assistant"}


class SamplingParams:
    """vLLM's SamplingParams: keyword arguments, vLLM's defaults (temperature 1.0, top_p 1.0, max_tokens 16)."""

    def __init__(
        self, *, n: int = 1, temperature: float = 1.0, top_p: float = 1.0, top_k: int = -1, max_tokens: int | None = 16,
        seed: int | None = None, stop: list[str] | None = None,
    ) -> None:  # fmt: skip
        self.n, self.temperature, self.top_p, self.top_k = n, temperature, top_p, top_k
        self.max_tokens, self.seed, self.stop = max_tokens, seed, stop


@dataclass
class CompletionOutput:
    index: int
    text: str


@dataclass
class RequestOutput:
    request_id: str
    outputs: list[CompletionOutput] = field(default_factory=list)


class LLM:
    """vLLM's LLM with its chat() signature; replies come from the class's script (an Exception is raised)."""

    script: ClassVar[list] = []
    instances: ClassVar[list] = []
    init_error: ClassVar[Exception | None] = None

    def __init__(self, model: str, tokenizer: str | None = None, gpu_memory_utilization: float = 0.9, **kwargs):
        if LLM.init_error is not None:
            raise LLM.init_error
        self.model, self.gpu_memory_utilization, self.kwargs = model, gpu_memory_utilization, kwargs
        self.calls: list[dict] = []
        LLM.instances.append(self)

    def chat(
        self, messages, sampling_params=None, use_tqdm=True, lora_request=None, chat_template=None,
        chat_template_content_format="auto", add_generation_prompt=True, continue_final_message=False, tools=None,
        mm_processor_kwargs=None,
    ) -> list[RequestOutput]:  # fmt: skip
        for message in messages:  # what the chat template needs, as vLLM's parse_chat_messages would refuse
            if message.get("role") not in ROLES or not isinstance(message.get("content"), str):
                raise ValueError(f"bad chat message {message!r}")
        self.calls.append(
            {"messages": [dict(m) for m in messages], "sampling_params": sampling_params, "use_tqdm": use_tqdm}
        )
        entry = LLM.script.pop(0)
        if isinstance(entry, Exception):
            raise entry
        return [RequestOutput(f"req-{len(self.calls)}", [CompletionOutput(0, text) for text in entry])]


@pytest.fixture
def vllm(monkeypatch, tmp_path):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    LLM.script, LLM.instances, LLM.init_error = [], [], None
    monkeypatch.setitem(sys.modules, "vllm", module)
    weights = tmp_path / "M3-Agent-Control"
    weights.mkdir()
    return types.SimpleNamespace(module=module, weights=str(weights))


def test_engine_gets_the_weights_and_the_configured_sampling(vllm):
    config = OpenAIConfig(temperature=0.3, top_p=0.8, max_tokens=256, reasks=1)
    reasoner, prompt = make_reasoner("vllm", SKILLS, config, vllm_model=vllm.weights)
    assert isinstance(reasoner, VLLMReasoner) and "navigate_to" in prompt  # the skills prompt, as openai
    (engine,) = LLM.instances
    assert engine.model == vllm.weights and engine.gpu_memory_utilization == 0.9
    sampling = reasoner.sampling
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens) == (0.3, 0.8, 256)
    assert reasoner.config.reasks == 1


def test_loop_search_then_answer_through_the_engine(vllm):
    LLM.script = [
        ["<think>look for the keys</think>Action: [Search]\nContent: where did Alice put the keys"],
        ['Action: [Answer]\nContent: <face_1> put the car keys in the hallway drawer.\nEvidence: ["episodic_3"]'],
    ]
    reasoner, prompt = make_reasoner("vllm", SKILLS, OpenAIConfig(), vllm_model=vllm.weights)
    memory = FakeMemory(names={"face_1": "Alice"})
    result = run_loop("Where did Alice put the keys?", reasoner, memory, SKILLS, LoopConfig(max_rounds=3), prompt)
    assert result.code == "SUCCEEDED", result.error_message
    assert result.answer == "Alice put the car keys in the hallway drawer."
    assert result.evidence_ids == ["episodic_3"]
    first, second = LLM.instances[0].calls
    assert first["messages"] == [
        {"role": "system", "content": prompt},
        {"role": "user", "content": "Question: Where did Alice put the keys?"},
    ]
    assert first["sampling_params"] is reasoner.sampling and first["use_tqdm"] is False
    assert second["messages"][2] == {
        "role": "assistant",
        "content": "Action: [Search]\nContent: where did Alice put the keys",
    }
    assert second["messages"][3]["role"] == "user"
    assert second["messages"][3]["content"].startswith("Searched knowledge: ")
    assert "episodic_3" in second["messages"][3]["content"]


@pytest.mark.parametrize(
    "reply",
    [
        "Action: [Search]\nContent: who is <face_2>",
        '<think>plan</think>\nAction: [Answer]\nContent: The keys are in the drawer.\nEvidence: ["episodic_3"]',
        'Action: [Answer]\nContent: Here they are.\nPlan: [{"skill": "pick", "target": "keys", "arguments": {}}]',
    ],
)
def test_replies_parse_as_in_the_openai_backend(vllm, reply):
    LLM.script = [[reply]]
    reasoner = VLLMReasoner(VLLMConfig(model=vllm.weights))
    state = LoopState("Bring me the keys", 1, 5, messages=[{"role": "user", "content": "Question: Bring me the keys"}])
    assert reasoner.decide(state) == parse_reply(reply)


def test_malformed_replies_are_re_asked_then_model_error(vllm):
    LLM.script = [["I think the drawer."], ["Action: [Answer]\nContent: In the drawer."]]
    reasoner = VLLMReasoner(VLLMConfig(model=vllm.weights, reasks=1))
    state = LoopState("Where?", 1, 5, messages=[{"role": "user", "content": "Question: Where?"}])
    assert reasoner.decide(state).text == "In the drawer."
    assert "could not be read" in LLM.instances[0].calls[1]["messages"][-1]["content"]  # the re-ask says why

    LLM.script = [["no grammar"], ["still none"]]
    with pytest.raises(ReasonerError, match="unusable replies after 2 attempt") as info:
        reasoner.decide(LoopState("Where?", 1, 5, messages=[{"role": "user", "content": "Question: Where?"}]))
    assert info.value.code == MODEL_ERROR


@pytest.mark.parametrize(
    ("entry", "message"),
    [(RuntimeError("CUDA error: out of memory"), "RuntimeError: CUDA error: out of memory"), ([], "IndexError")],
)
def test_engine_failures_end_the_goal_with_model_error(vllm, entry, message):
    LLM.script = [entry]
    reasoner = VLLMReasoner(VLLMConfig(model=vllm.weights))
    result = run_loop("Where are the keys?", reasoner, FakeMemory(), SKILLS, LoopConfig(max_rounds=2))
    assert result.code == MODEL_ERROR
    assert result.error_message.startswith("vLLM engine failed: ") and message in result.error_message


def test_engine_that_cannot_load_or_a_missing_directory_is_a_clear_error(vllm, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"vLLM model directory not found: .*nowhere"):
        VLLMReasoner(VLLMConfig(model=str(tmp_path / "nowhere")))
    LLM.init_error = RuntimeError("No CUDA GPUs are available")
    with pytest.raises(RuntimeError, match=re.escape(f"vLLM could not load the model in {vllm.weights}: No CUDA GPUs")):
        VLLMReasoner(VLLMConfig(model=vllm.weights))
