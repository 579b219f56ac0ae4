"""A local HTTP server speaking OpenAI's /v1/audio/transcriptions, transcribing with pocketsphinx.

Test support: the OpenAI-protocol client is exercised against real HTTP, real multipart WAV
uploads and a real recogniser behind it.
"""

from __future__ import annotations

import io
import json
import math
import threading
import wave
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from m3_perception.speech.pocketsphinx_asr import PocketsphinxAsr


class TranscriptionServer:
    def __init__(self, api_key: str = "", fail_with: int = 0) -> None:
        self.api_key = api_key
        self.fail_with = fail_with  # answer every transcription with this HTTP status when set
        self.requests: list[dict] = []
        self._asr = PocketsphinxAsr()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _auth_ok(self) -> bool:
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    self._json(401, {"error": {"message": "bad key"}})
                    return False
                return True

            def _json(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self._auth_ok() and self.path == "/v1/models":
                    self._json(200, {"data": [{"id": "whisper-1"}]})

            def do_POST(self) -> None:
                if not self._auth_ok():
                    return
                if self.path != "/v1/audio/transcriptions":
                    self._json(404, {"error": {"message": "no route"}})
                    return
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                msg = BytesParser(policy=HTTP).parsebytes(
                    f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + raw
                )
                parts = {
                    p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
                    for p in msg.iter_parts()
                }
                server.requests.append({k: v if k == "file" else v.decode() for k, v in parts.items()})
                if server.fail_with:
                    self._json(server.fail_with, {"error": {"message": "model overloaded"}})
                    return
                with wave.open(io.BytesIO(parts["file"])) as w:
                    pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0
                with server._lock:
                    t = server._asr.transcribe(pcm)
                logprob = math.log(max(t.confidence, 1e-6))
                self._json(
                    200, {"text": t.text, "language": "english", "segments": [{"text": t.text, "avg_logprob": logprob}]}
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> TranscriptionServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
