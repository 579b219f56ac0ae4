"""`python -m m3_agent.llm.llama_server`: llama-cpp-python's OpenAI-compatible server, with a prompt
cache whose size limit holds.

Why this wrapper exists: llama-cpp-python (0.3.x) counts a cached prompt state by its KV bytes
only (`llama_state_size`, ~25 MB for 1.5B Qwen at 700 tokens), but every entry also keeps a copy
of the logits (`scores`: up to n_batch x vocabulary floats, 311 MB for Qwen's 152k vocabulary).
A "1 GB" cache so grew to ~40 entries and 13 GB over one demo run, and the kernel killed the
server mid-run. Counting what an entry really holds keeps the cache within its budget (about three
entries per GB: enough for the memorizer's and the reasoner's system prompts). Everything else is
the library's own server, unchanged; the flags are its flags.
"""

from __future__ import annotations

import llama_cpp
from llama_cpp.llama_cache import LlamaRAMCache


def entry_bytes(state) -> int:
    """What one cached state holds in RAM: the KV state plus its copies of tokens and logits."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


class BoundedRAMCache(LlamaRAMCache):
    """LlamaRAMCache whose capacity counts every byte an entry keeps (least recently used first out)."""

    @property
    def cache_size(self) -> int:
        return sum(entry_bytes(state) for state in self.cache_state.values())


def main() -> None:
    llama_cpp.LlamaRAMCache = BoundedRAMCache  # the server builds its cache by this name (server/model.py)
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
