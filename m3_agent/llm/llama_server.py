"""`python -m m3_agent.llm.llama_server`: llama-cpp-python's OpenAI-compatible server, with a prompt
cache whose size limit holds and whose entries hold only what a later request reuses.

Why this wrapper exists: llama-cpp-python (0.3.x) counts a cached prompt state by its KV bytes
only (`llama_state_size`, ~25 MB for 1.5B Qwen at 700 tokens), but every entry also keeps a copy
of the logits (`scores`: up to n_batch x vocabulary floats, 311 MB for Qwen's 152k vocabulary).
A "1 GB" cache so grew to ~40 entries and 13 GB over one demo run, and the kernel killed the
server mid-run. Counting what an entry really holds keeps the cache within its budget.

And with `--logits_all false` (how `m3 llm serve` starts it) the library never writes those logits:
sampling reads the context's own, and only logprobs would need the copy. Kept, the copy made an entry
311 MB, so a 1 GB cache held three prompts: the fact reader's short requests pushed the memorizer's
prompt out, and each clip's memorizer request read its 1,000 tokens again (4 tokens reused instead of
~620; the demo's memorizing took 21 s a clip longer). Without it an entry is its KV state, and the
memorizer's, reasoner's and reader's prompts all stay. Everything else is the library's own server,
unchanged; the flags are its flags.
"""

from __future__ import annotations

import argparse
import sys

import llama_cpp
import numpy as np
from llama_cpp.llama_cache import LlamaRAMCache


def entry_bytes(state) -> int:
    """What one cached state holds in RAM: the KV state plus its copies of tokens and logits."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


class BoundedRAMCache(LlamaRAMCache):
    """LlamaRAMCache whose capacity counts every byte an entry keeps (least recently used first out).

    keep_logits False (the server runs with --logits_all false): an entry's logits become one zero row, which
    load_state copies (one row, not 311 MB) and broadcasts over the rows the library never wrote."""

    keep_logits = True

    @property
    def cache_size(self) -> int:
        return sum(entry_bytes(state) for state in self.cache_state.values())

    def __setitem__(self, key, value) -> None:
        if not self.keep_logits:
            value.scores = np.zeros((1, value.scores.shape[1]), value.scores.dtype)  # one row: load_state broadcasts it
        super().__setitem__(key, value)


def logits_all(argv: list[str]) -> bool:
    """The server's --logits_all flag, read by the library's own argument parser (its default when absent)."""
    from llama_cpp.server.cli import add_args_from_model
    from llama_cpp.server.settings import ModelSettings

    parser = argparse.ArgumentParser(add_help=False)
    add_args_from_model(parser, ModelSettings)
    value = parser.parse_known_args(argv)[0].logits_all
    return ModelSettings.model_fields["logits_all"].default if value is None else value


def main() -> None:
    BoundedRAMCache.keep_logits = logits_all(sys.argv[1:])
    llama_cpp.LlamaRAMCache = BoundedRAMCache  # the server builds its cache by this name (server/model.py)
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
