"""Fixtures shared by the tests in test/."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The real embedded language model for integration tests: the packaged Qwen2.5-Coder-1.5B GGUF
    served by llama.cpp (m3_agent.llm.server) on a free port for the whole session.

    Use `.base_url` ("http://127.0.0.1:PORT/v1") and `.model` (the name to send). A missing or
    corrupt model, or llama-server not built, fails with an error naming the fix
    (`bash bootstrap.sh setup`): it is never skipped."""
    from m3_agent.llm import models
    from m3_agent.llm.server import LlamaServer, ServerConfig, free_port

    path, name = models.resolve(models.DEFAULT_MODEL)
    log_file = tmp_path_factory.mktemp("llm_server") / "llama-server.log"
    server = LlamaServer(ServerConfig(model_path=path, model=name, port=free_port(), log_file=log_file))
    server.start()
    try:
        yield server
    finally:
        server.stop()
