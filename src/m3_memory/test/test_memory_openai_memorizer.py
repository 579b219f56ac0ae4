"""The openai memorizer's protocol side against a real local HTTP server speaking chat completions:
the request (schema, labels, images), reply parsing and checks, retries and the typed failures.
The same code path against a real model: test/test_llm_memorizer.py."""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from m3mem_evidence import S, clip, face, match, voice

from m3_memory.memorize.clip_prompt import describe, reply_schema
from m3_memory.memorize.openai_compatible import (
    MemorizerError,
    MemorizerUnavailable,
    OpenAIMemorizer,
    parse_reply,
    said_name,
)
from m3_memory.memory import Memory

GOOD = {
    "names": [{"line": 1, "name": "Rosa", "whose": "self"}],
    "semantic": ["<voice_1> keeps the folder on the shelf.", "Equivalence: <face_1>, <voice_1>"],
    "episodic": ["<face_1> puts a folder on the shelf."],
}


class ScriptedServer:
    """Replies from a script: an int is an HTTP error status, a string is the assistant's content.
    A warm-up (a 1-token request) gets an empty reply outside the script and is kept in warm_ups."""

    def __init__(self, script: list, port: int = 0) -> None:
        self.script = list(script)
        self.requests: list[dict] = []
        self.warm_ups: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                warm_up = body.get("max_tokens") == 1
                (outer.warm_ups if warm_up else outer.requests).append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                step = "" if warm_up else outer.script.pop(0) if outer.script else 500
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

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
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
        voices=[voice("voice_1", 2, 4, "I'm Rosa. The folder stays on the shelf.")],
        matches=[match("face_1", "voice_1", 4)],
    )


def jpeg(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 120, 40)).save(out, format="JPEG")
    return out.getvalue()


def test_parse_reply_is_lenient_about_the_wrapping_only():
    fenced = "Sure!\n```json\n" + json.dumps(GOOD) + "\n```\nHope this helps."
    parsed = parse_reply(fenced)
    assert parsed.mentions == [(1, "Rosa", "self")] and parsed.episodic == GOOD["episodic"]
    reference_style = parse_reply('{"episodic": "one event", "semantic": ["<voice_3> is called Ugo."]}')
    assert reference_style.episodic == ["one event"] and reference_style.names == [("voice_3", "Ugo")]
    odd = '{"names": [{"line": "1", "name": "A", "whose": "self"}, {"line": 2, "name": "B", "whose": "boss"}]}'
    assert parse_reply(odd).mentions == []  # a line that is no number, a role that is none of the three
    assert parse_reply('{"names": [], "semantic": [], "episodic": []}').names == []  # nothing to learn is fine
    assert parse_reply("no json here") is None
    assert parse_reply('{"episodic": {"a": 1}}') is None


def test_a_name_is_kept_only_when_it_was_said():
    said = ["hi i'm rosa del mar", "Ask TOM about it"]
    assert said_name("rosa", said) == "Rosa"
    assert said_name("Rosa del Mar", said) == "Rosa del Mar"
    assert said_name("TOM", said) == "Tom"
    assert said_name("Marco", said) is None  # a name from the prompt's examples, never said here
    assert said_name("<voice_1>", said) is None and said_name("", said) is None
    cased = ["Leave your umbrella next to the bookshelf.", "Thanks, Rui, I will."]  # Whisper writes case
    assert said_name("Umbrella", cased) is None and said_name("rui", cased) == "Rui"
    assert said_name("Leave", cased) is None  # capitalised as the first word, but a common word (common_words)
    assert said_name("Rosa", ["Rosa, leave it."]) == "Rosa"


def test_the_model_sees_who_is_one_person_and_who_else_is_present():
    c = clip(
        0,
        faces=[face("face_4", 1.0), face("face_4", 20.0), face("face_5", 2.0), face("face_5", 12.0)],
        voices=[voice("voice_2", 3, 5, "this is my neighbour ugo"), voice("voice_7", 15, 16, "hello there")],
        matches=[match("face_4", "voice_2", 5)],
    )
    ids = {"face_4": "face_1", "face_5": "face_2", "voice_2": "voice_1", "voice_7": "voice_3"}
    view = describe(c, ids, lambda e: None, lambda e: "Nina" if e == "face_1" else "")
    assert view.labels == ["<face_1>", "<face_2>", "<voice_1>", "<voice_3>"]
    lines = view.text.splitlines()
    assert lines[0] == "Clip of 30 s. People: <face_1> = <voice_1> (Nina); <face_2>; <voice_3>"
    assert lines[1] == "Seen: <face_1> 1-20 s, <face_2> 2-12 s"
    assert lines[3] == '1. <voice_1>, seen with <face_2>: "this is my neighbour ugo"'
    assert lines[4] == '2. <voice_3>, seen with <face_1>: "hello there"'  # face_2 left at 12 s
    assert view.turns.speakers == ["voice_1", "voice_3"] and view.turns.seen_with == [["face_2"], ["face_1"]]
    assert view.known == {"face_1": "Nina"}
    item = reply_schema(len(view.turns.texts))["properties"]["names"]["items"]["properties"]
    assert item["line"]["enum"] == [1, 2] and item["whose"]["enum"] == ["self", "addressed", "introduced"]
    assert reply_schema(0)["properties"]["names"]["maxItems"] == 0  # no speech: no name can be placed


def test_request_shape_text_only_then_with_keyframes(tmp_path, embedder, server_factory, monkeypatch):
    monkeypatch.setenv("M3_TEST_KEY", "sk-local")
    server = server_factory([json.dumps(GOOD), json.dumps(GOOD)])
    memorizer = OpenAIMemorizer(server.url, "m3-memorization", api_key_env="M3_TEST_KEY", timeout_s=5)
    mem = Memory.open(str(tmp_path / "m"), embedder, memorizer=memorizer)
    record = mem.ingest(evidence())
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-local"
    body = first["body"]
    assert body["model"] == "m3-memorization" and body["temperature"] == 0.0
    assert isinstance(body["messages"][1]["content"], str)  # text-only: no images, no part list
    assert body["response_format"]["type"] == "json_object"
    assert body["response_format"]["schema"]["properties"]["names"]["items"]["properties"]["line"]["enum"] == [1]
    assert {n.text for n in record.semantic} >= {"<voice_1> is called Rosa.", "Equivalence: <face_1>, <voice_1>"}
    assert '<voice_1> says: "I\'m Rosa. The folder stays on the shelf."' in [n.text for n in record.episodic]
    assert mem.search.get_entity("face_1").name == "Rosa"

    vision = OpenAIMemorizer(server.url, "qwen-vl", response_format="json_schema", keyframes=2, image_max_px=64)
    later = evidence()
    later.clip_index, later.start_ns, later.end_ns = 1, 30 * S, 60 * S
    later.keyframes = [(31 * S, jpeg(640, 480)), (40 * S, jpeg(640, 480)), (50 * S, jpeg(640, 480))]
    mem.ingest(later, memorizer=vision)
    body = server.requests[1]["body"]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["names", "semantic", "episodic"]
    parts = body["messages"][1]["content"]
    captions = [p["text"] for p in parts[1:] if p["type"] == "text"]
    assert captions == ["Frame at 1 s:", "Frame at 20 s:", "Face <face_1>:"]
    images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(images) == 3 and all(url.startswith("data:image/jpeg;base64,") for url in images)
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(images[0].split(",", 1)[1]))) as frame:
        assert max(frame.size) == 64  # shrunk for the model
    mem.close()


def test_unknown_labels_and_unsaid_names_are_dropped(tmp_path, embedder, server_factory):
    reply = {
        "names": [{"line": 1, "name": "Marco", "whose": "self"}, {"line": 2, "name": "Rosa", "whose": "self"}],
        "semantic": ["<face_9> likes tea.", "<voice_1> keeps the folder on the shelf."],
        "episodic": [],
    }
    server = server_factory([json.dumps(reply)])
    mem = Memory.open(str(tmp_path / "m"), embedder, memorizer=OpenAIMemorizer(server.url, "m", timeout_s=5))
    record = mem.ingest(evidence())
    # Marco was never said and line 2 does not exist: the name is the one the cue words read on line 1
    assert mem.search.get_entity("voice_1").name == "Rosa"
    assert mem.graph.entities[mem.graph.person_of("voice_1")].name_votes == {"Rosa": 0.9}  # its line heard at 0.9
    assert "<voice_1> keeps the folder on the shelf." in [n.text for n in record.semantic]
    assert all("face_9" not in n.text for n in record.semantic)
    mem.close()


def test_silent_clip_needs_no_model_call(tmp_path, embedder, server_factory):
    server = server_factory([])
    mem = Memory.open(str(tmp_path / "m"), embedder, memorizer=OpenAIMemorizer(server.url, "m", timeout_s=5))
    record = mem.ingest(clip(0, faces=[face("face_1", 1.0)]))
    assert [n.text for n in record.episodic] == ["<face_1> is seen."] and server.requests == []
    mem.close()


def test_retries_then_typed_failures(tmp_path, embedder, server_factory):
    server = server_factory([503, "I think the answer is...", json.dumps(GOOD)])
    mem = Memory.open(str(tmp_path / "m"), embedder, memorizer=OpenAIMemorizer(server.url, "m", timeout_s=5))
    assert mem.ingest(evidence()) is not None and len(server.requests) == 3
    assert server.requests[2]["body"]["temperature"] > 0  # a retry after an unusable reply samples
    mem.close()

    nonsense = server_factory(["nonsense", "still nonsense", "more nonsense", json.dumps(GOOD)])
    mem = Memory.open(str(tmp_path / "n"), embedder, memorizer=OpenAIMemorizer(nonsense.url, "m", timeout_s=5))
    with pytest.raises(MemorizerError, match="not the JSON object") as caught:
        mem.ingest(evidence())
    assert not isinstance(caught.value, MemorizerUnavailable)
    assert len(nonsense.requests) == 3 and mem.search.get_stats().clips == 0  # nothing half-written
    mem.close()

    rejected = server_factory([400])
    with pytest.raises(MemorizerError, match="HTTP 400") as caught:
        OpenAIMemorizer(rejected.url, "m", timeout_s=5).memorize(
            evidence(), {"face_1": "face_1", "voice_1": "voice_1"}, lambda e: None
        )
    assert not isinstance(caught.value, MemorizerUnavailable)


def test_unreachable_endpoint_and_bad_configuration(tmp_path):
    memorizer = OpenAIMemorizer("http://127.0.0.1:9/v1", "m", max_retries=2, timeout_s=1)
    with pytest.raises(MemorizerUnavailable, match="attempt 2"):
        memorizer.memorize(evidence(), {"face_1": "face_1", "voice_1": "voice_1"}, lambda e: None)
    with pytest.raises(ValueError, match="openai_endpoint"):
        OpenAIMemorizer("", "m")
    with pytest.raises(ValueError, match="prompt file not found"):
        OpenAIMemorizer("http://127.0.0.1:9/v1", "m", prompt_file=str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="openai_response_format"):
        OpenAIMemorizer("http://127.0.0.1:9/v1", "m", response_format="grammar")
