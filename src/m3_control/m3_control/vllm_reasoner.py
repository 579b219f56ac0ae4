"""Reasoner running vLLM in this process (backend "vllm"): the model weights are a local directory.

vLLM is imported only when this back-end is chosen; it is not installed with the suite, so choosing
it without vLLM is a clear error naming the package. The engine calls follow vLLM's documented
offline chat API (docs.vllm.ai, "LLM Class" and the examples/offline_inference/chat.py example):
`llm = vllm.LLM(model=DIR, gpu_memory_utilization=...)`, `params = vllm.SamplingParams(temperature=...,
top_p=..., max_tokens=...)`, `outputs = llm.chat(messages, sampling_params=params, use_tqdm=False)`
with OpenAI-style `{"role", "content"}` messages, the reply in `outputs[0].outputs[0].text`. Replies
are parsed by the same grammar and re-ask policy as the openai back-end (decide_by_chat).

NOT RUN WITH vLLM: vLLM is not installed here and there is no GPU, so vLLM itself never ran.
test_vllm_reasoner.py puts a stand-in `vllm` module with those documented signatures into
sys.modules: it proves what this code sends to the engine and how it reads and maps the replies and
failures, not that a real engine accepts it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from m3_control.openai_reasoner import decide_by_chat
from m3_control.reasoner import MODEL_ERROR, Answer, LoopState, ReasonerError, Search


@dataclass
class VLLMConfig:
    model: str  # local directory of the weights, e.g. /models/M3-Agent-Control
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 1024
    reasks: int = 2
    gpu_memory_utilization: float = 0.9


def import_vllm():
    """The vllm module, or ImportError saying what to install."""
    try:
        import vllm  # optional heavy dependency, imported on demand
    except ImportError as error:
        raise ImportError(
            "backend 'vllm' needs the Python package 'vllm' (pip install vllm, on a CUDA machine); "
            "it is not installed. Use backend 'openai' against a vLLM server, or 'extractive'."
        ) from error
    return vllm


class VLLMReasoner:
    """Reasoner over an in-process vllm.LLM engine."""

    def __init__(self, config: VLLMConfig) -> None:
        vllm = import_vllm()
        if not os.path.isdir(config.model):
            raise FileNotFoundError(f"vLLM model directory not found: {config.model}")
        self.config = config
        try:
            self.engine = vllm.LLM(model=config.model, gpu_memory_utilization=config.gpu_memory_utilization)
        except Exception as error:  # CUDA missing, out of memory, unreadable weights: say which model
            raise RuntimeError(f"vLLM could not load the model in {config.model}: {error}") from error
        self.sampling = vllm.SamplingParams(
            temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens
        )

    def complete(self, messages: list[dict]) -> str:
        """One chat reply's text; any engine failure, or no output, is MODEL_ERROR."""
        try:
            outputs = self.engine.chat(messages, sampling_params=self.sampling, use_tqdm=False)
            return outputs[0].outputs[0].text
        except Exception as error:  # engine failures of any kind become MODEL_ERROR
            raise ReasonerError(MODEL_ERROR, f"vLLM engine failed: {error.__class__.__name__}: {error}") from error

    def decide(self, state: LoopState) -> Search | Answer:
        return decide_by_chat(self.complete, state, self.config.reasks)
