"""The embedded server's prompt cache stays within its budget.

llama-cpp-python counts a cached state by its KV bytes only, while each entry also holds a copy of
the logits (311 MB for Qwen's vocabulary): a "1 GB" cache reached 11 GB over one demo run and the
kernel killed the server. m3_agent.llm.llama_server counts every byte an entry keeps.
"""

from __future__ import annotations

import numpy as np
from llama_cpp.llama import LlamaState
from llama_cpp.llama_cache import LlamaRAMCache

from m3_agent.llm.llama_server import BoundedRAMCache, entry_bytes, logits_all

MB = 1 << 20


def state(first_token: int) -> LlamaState:
    """A state as llama-cpp-python saves one: 1 MB of KV state, 4 MB of logits, the tokens."""
    return LlamaState(
        input_ids=np.full(1024, first_token, np.intc),
        scores=np.zeros((8, 128 * 1024), np.single),
        n_tokens=1024,
        llama_state=b"",
        llama_state_size=MB,
        seed=0,
    )


def fill(cache: LlamaRAMCache, entries: int) -> None:
    for k in range(entries):
        cache[(k, k + 1, k + 2)] = state(k)


def test_library_cache_undercounts_what_it_holds():
    """The defect being worked around: ten 5 MB entries all kept under a 10 MB budget."""
    cache = LlamaRAMCache(capacity_bytes=10 * MB)
    fill(cache, 10)
    assert len(cache.cache_state) == 10
    assert sum(entry_bytes(s) for s in cache.cache_state.values()) > 40 * MB


def test_bounded_cache_keeps_its_budget_and_the_most_recent_entries():
    cache = BoundedRAMCache(capacity_bytes=11 * MB)
    fill(cache, 10)
    assert cache.cache_size <= 11 * MB
    assert list(cache.cache_state) == [(8, 9, 10), (9, 10, 11)]  # least recently used went first
    assert cache[(9, 10, 11, 500)].input_ids[0] == 9  # the longest prefix is still found


def test_bounded_cache_used_again_stays_in():
    cache = BoundedRAMCache(capacity_bytes=11 * MB)
    fill(cache, 2)
    cache[(0, 1, 2, 7)]  # the first system prompt is used again: it becomes the most recent
    cache[(5, 5, 5)] = state(5)
    assert (0, 1, 2) in cache.cache_state and (1, 2, 3) not in cache.cache_state


def test_without_logits_an_entry_is_its_kv_state_and_loads_back_the_same_shape():
    """With --logits_all false the library never writes the logits it copies into each entry: kept, a
    1 GB cache held three 311 MB prompts, and the fact reader's requests pushed the memorizer's out."""
    cache = BoundedRAMCache(capacity_bytes=16 * MB)
    cache.keep_logits = False
    fill(cache, 10)
    assert len(cache.cache_state) == 10  # 1 MB of KV state and one 0.5 MB row of logits each, not 5 MB
    assert cache.cache_size <= 16 * MB
    kept = cache[(0, 1, 2, 9)]
    copied = kept.scores.copy()  # what Llama.load_state copies, then assigns over the rows it saved
    assert copied.nbytes == 128 * 1024 * 4  # one row, not a transient copy of every row
    scores = np.ones((8, 128 * 1024), np.float32)
    scores[:8, :] = copied
    assert not scores.any()


def test_the_servers_logits_flag_is_read_as_the_library_reads_it():
    assert logits_all([]) is True  # the library's default keeps them
    assert logits_all(["--model", "m.gguf", "--logits_all", "false"]) is False
    assert logits_all(["--logits_all=False"]) is False
    assert logits_all(["--logits_all", "true"]) is True
