"""Speech-to-text through an OpenAI-compatible `/v1/audio/transcriptions` endpoint.

For a Whisper served by vLLM (or any server speaking the OpenAI audio protocol). Standard
library only (urllib); the utterance is sent as 16 kHz 16-bit WAV with
`response_format=verbose_json`, and the confidence is exp(mean segment avg_logprob).
"""

from __future__ import annotations

import io
import json
import math
import os
import urllib.error
import urllib.request
import uuid
import wave

import numpy as np

from m3_perception.speech.pocketsphinx_asr import Transcript


class AsrBackendError(RuntimeError):
    """The transcription endpoint is unreachable or answered with an error; the message says which."""


def wav_bytes(samples: np.ndarray, rate: int = 16000) -> bytes:
    """Mono 16-bit PCM WAV file contents."""
    pcm = (np.clip(np.asarray(samples, np.float32), -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return buf.getvalue()


class OpenAiAsr:
    """Client of `<endpoint>/audio/transcriptions`; `endpoint` is the base URL, e.g. http://host:8000/v1."""

    def __init__(
        self,
        endpoint: str,
        model: str = "whisper-1",
        language: str = "en",
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        check: bool = True,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self.language = language
        self.timeout_s = timeout_s
        self._key = os.environ.get(api_key_env, "") if api_key_env else ""
        if check:
            self._probe()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    def _probe(self) -> None:
        """Fail at start-up, naming the endpoint, when nothing answers there."""
        req = urllib.request.Request(f"{self.endpoint}/models", headers=self._headers())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                r.read()
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                raise AsrBackendError(f"transcription endpoint {self.endpoint} refused the API key ({e.code})") from e
            # Some servers have no /models route; they still answered, so the endpoint is up.
        except (urllib.error.URLError, OSError) as e:
            raise AsrBackendError(f"transcription endpoint {self.endpoint} is unreachable: {e}") from e

    def transcribe(self, samples: np.ndarray) -> Transcript:
        boundary = uuid.uuid4().hex
        fields = {"model": self.model, "language": self.language, "response_format": "verbose_json"}
        body = io.BytesIO()
        for k, v in fields.items():
            body.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
        body.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="utterance.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n".encode()
        )
        body.write(wav_bytes(samples))
        body.write(f"\r\n--{boundary}--\r\n".encode())
        req = urllib.request.Request(
            f"{self.endpoint}/audio/transcriptions",
            data=body.getvalue(),
            headers={**self._headers(), "Content-Type": f"multipart/form-data; boundary={boundary}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                payload = r.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:300].decode(errors="replace")
            raise AsrBackendError(f"transcription endpoint answered HTTP {e.code}: {detail}") from e
        except (urllib.error.URLError, OSError) as e:
            raise AsrBackendError(f"transcription endpoint {self.endpoint} is unreachable: {e}") from e
        try:
            data = json.loads(payload)
            text = str(data["text"]).strip()
        except (ValueError, KeyError, TypeError) as e:
            raise AsrBackendError(f"transcription endpoint sent no 'text' in {payload[:200]!r}") from e
        segs = [s for s in data.get("segments") or [] if isinstance(s, dict) and "avg_logprob" in s]
        # Without segment log-probabilities the server gives no confidence: report 0 (unknown).
        conf = math.exp(float(np.mean([float(s["avg_logprob"]) for s in segs]))) if segs and text else 0.0
        # verbose_json names the language in words ("english"); the requested BCP-47 tag is reported.
        return Transcript(text, min(1.0, max(0.0, conf)), self.language)
