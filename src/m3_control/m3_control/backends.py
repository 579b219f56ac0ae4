"""Choose a reasoner by name (configuration, never a code edit)."""

from __future__ import annotations

from m3_control.extractive_reasoner import ExtractiveReasoner
from m3_control.openai_reasoner import OpenAIConfig, OpenAIReasoner, default_prompt, load_prompt
from m3_control.reasoner import Reasoner
from m3_control.skills import Skill, describe_skills

BACKENDS = ("extractive", "openai", "vllm")


def make_reasoner(
    backend: str,
    skills: dict[str, Skill],
    openai: OpenAIConfig | None = None,
    system_prompt_file: str = "",
    vllm_model: str = "",
) -> tuple[Reasoner, str]:
    """(reasoner, system prompt); ValueError for an unknown back-end, ImportError/FileNotFoundError as they come."""
    if backend == "extractive":
        return ExtractiveReasoner(), ""
    config = openai or OpenAIConfig()
    # The packaged prompt matches the reply format: constrained JSON, or the reference text grammar.
    fmt = config.response_format if backend == "openai" else "none"
    prompt = load_prompt(system_prompt_file or None, describe_skills(skills), default_prompt(fmt))
    if backend == "openai":
        return OpenAIReasoner(config, skills=skills), prompt
    if backend == "vllm":
        from m3_control.vllm_reasoner import VLLMConfig, VLLMReasoner

        return (
            VLLMReasoner(
                VLLMConfig(
                    model=vllm_model or config.model,
                    temperature=config.temperature,
                    top_p=config.top_p,
                    max_tokens=config.max_tokens,
                    reasks=config.reasks,
                )
            ),
            prompt,
        )
    raise ValueError(f"unknown backend {backend!r}; choose one of {list(BACKENDS)}")
