"""The openai memorizer against a real local HTTP server speaking the chat-completions protocol."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from m3mem_evidence import clip, face, match, voice

from m3_memory.memory import Memory
from m3_memory.openai_memorizer import MemorizerError, OpenAIMemorizer, parse_memories

GOOD = {
    "episodic": ["<face_1> waves.", '<voice_1> says: "put the folder on the shelf"'],
    "semantic": ["Equivalence: <face_1>, <voice_1>", "<voice_1> is called Alice.", "The red folder is on the shelf."],
}


class ScriptedServer:
    """Replies from a script: an int is an HTTP error status, a string is the assistant's content."""

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                step = outer.script.pop(0) if outer.script else 500
                if isinstance(step, int):
                    self.send_response(step)
                    self.end_headers()
                    return
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": step}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server_factory():
    servers = []

    def make(script: list) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def evidence():
    return clip(
        0,
        faces=[face("face_1", 1.0, crop=b"\xff\xd8crop")],
        voices=[voice("voice_1", 2, 4, "put the folder on the shelf")],
        matches=[match("face_1", "voice_1", 4)],
    )


def test_parse_memories_is_robust():
    fenced = "Sure!\n```json\n" + json.dumps(GOOD) + "\n```\nHope this helps."
    assert parse_memories(fenced) == (GOOD["episodic"], GOOD["semantic"])
    assert parse_memories('{"episodic": "one event", "semantic": []}') == (["one event"], [])
    assert parse_memories("no json here") is None
    assert parse_memories('{"episodic": {"a": 1}}') is None
    assert parse_memories('{"episodic": [], "semantic": []}') is None


def test_memorizer_retries_then_stores(tmp_path, embedder, server_factory, monkeypatch):
    monkeypatch.setenv("M3_TEST_KEY", "sk-local")
    server = server_factory([503, "I think the answer is...", "```json\n" + json.dumps(GOOD) + "\n```"])
    memorizer = OpenAIMemorizer(server.url, "m3-memorization", api_key_env="M3_TEST_KEY", max_retries=3, timeout_s=5)
    mem = Memory.open(str(tmp_path / "m"), embedder, memorizer=memorizer)
    record = mem.ingest(evidence())
    assert [n.text for n in record.episodic] == GOOD["episodic"]
    assert {n.text for n in record.semantic} == set(GOOD["semantic"])
    assert mem.graph.person_of("voice_1") == mem.graph.person_of("face_1")
    assert mem.search.get_entity("face_1").name == "Alice"
    assert len(server.requests) == 3
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-local"
    assert first["body"]["model"] == "m3-memorization"
    user = first["body"]["messages"][1]["content"]
    assert '<voice_1> from 2.0 to 4.0: "put the folder on the shelf"' in user[0]["text"]
    assert user[2]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert server.requests[2]["body"]["messages"][-1]["role"] == "user"  # the retry asked for JSON only
    mem.close()


def test_memorizer_gives_up_after_bounded_retries(tmp_path, embedder, server_factory):
    server = server_factory(["nonsense", "still nonsense", "more nonsense", json.dumps(GOOD)])
    memorizer = OpenAIMemorizer(server.url, "m", max_retries=3, timeout_s=5)
    mem = Memory.open(str(tmp_path / "m"), embedder, memorizer=memorizer)
    with pytest.raises(MemorizerError, match="not the JSON object"):
        mem.ingest(evidence())
    assert len(server.requests) == 3
    assert mem.search.get_stats().clips == 0  # nothing half-written
    mem.close()


def test_unreachable_endpoint_and_bad_configuration(tmp_path):
    memorizer = OpenAIMemorizer("http://127.0.0.1:9/v1", "m", max_retries=2, timeout_s=1)
    with pytest.raises(MemorizerError, match="attempt 2"):
        memorizer.memorize(evidence(), {"face_1": "face_1", "voice_1": "voice_1"}, lambda e: None)
    with pytest.raises(ValueError, match="openai_endpoint"):
        OpenAIMemorizer("", "m")
    with pytest.raises(ValueError, match="prompt file not found"):
        OpenAIMemorizer("http://127.0.0.1:9/v1", "m", prompt_file=str(tmp_path / "missing.txt"))
