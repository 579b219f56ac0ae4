"""The `openai` memorizer: any OpenAI-compatible chat endpoint (vLLM serving M3-Agent-Memorization,
Qwen2.5-Omni, or a hosted model) turns a clip's evidence into episodic and semantic memories.

The prompt is a file the user can replace. Replies are parsed robustly (code fences, text around
the JSON object) and retried a bounded number of times; an endpoint that stays down or keeps
replying nonsense raises MemorizerError (the clip is then reported as not stored, never faked).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

from m3_memory.graph import MemorizerOutput
from m3_memory.records import KIND_EPISODIC, KIND_SEMANTIC, ClipEvidence, MemoryDraft

DEFAULT_PROMPT = Path(__file__).with_name("prompts") / "memorize.txt"
NS = 1_000_000_000
_EQUIVALENCE = re.compile(r"^\s*equivalence:\s*<((?:face|voice)_\d+)>\s*,\s*<((?:face|voice)_\d+)>", re.IGNORECASE)
_NAMED = re.compile(r"^\s*<((?:face|voice|person)_\d+)> is called ([A-Z][\w'-]+)\.?\s*$")


class MemorizerError(RuntimeError):
    """The model back-end could not produce memories for a clip (unreachable or unusable replies)."""


def extract_json_object(text: str) -> dict | None:
    """The first JSON object in a reply (tolerates code fences and prose around it)."""
    text = re.sub(r"```(?:json)?", "", text)
    decoder = json.JSONDecoder()
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        try:
            value, _ = decoder.raw_decode(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_memories(reply: str) -> tuple[list[str], list[str]] | None:
    """(episodic, semantic) lists of strings from a reply, or None when it is unusable."""
    data = extract_json_object(reply)
    if data is None:
        return None
    lists = []
    for key in ("episodic", "semantic"):
        value = data.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return None
        lists.append([str(v).strip() for v in value if isinstance(v, (str, int, float)) and str(v).strip()])
    if not lists[0] and not lists[1]:
        return None
    return lists[0], lists[1]


class OpenAIMemorizer:
    """Chat-completions client; one request per clip (plus bounded retries)."""

    name = "openai"

    def __init__(
        self,
        endpoint: str,
        model: str,
        prompt_file: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        send_crops: bool = True,
    ) -> None:
        if not endpoint:
            raise ValueError("memorizer 'openai' needs openai_endpoint (e.g. http://localhost:8000/v1)")
        if not model:
            raise ValueError("memorizer 'openai' needs openai_model")
        path = Path(prompt_file) if prompt_file else DEFAULT_PROMPT
        if not path.is_file():
            raise ValueError(f"memorizer prompt file not found: {path}")
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.model = model
        self.prompt = path.read_text(encoding="utf-8")
        self.api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        self.timeout_s = timeout_s
        self.max_retries = max(1, int(max_retries))
        self.send_crops = send_crops

    def describe(self, clip: ClipEvidence, ids: dict[str, str]) -> list[dict]:
        """The user message content: evidence as text, then labelled face crops."""
        t0 = clip.start_ns
        lines = [
            f"Clip {clip.clip_index}, {(clip.end_ns - clip.start_ns) / NS:.0f} s long. Times are seconds into the clip."
        ]
        seen: dict[str, list[float]] = {}
        crops: dict[str, bytes] = {}
        for face in sorted(clip.faces, key=lambda f: f.stamp_ns):
            span = seen.setdefault(ids[face.face_id], [(face.stamp_ns - t0) / NS] * 2)
            span[1] = (face.stamp_ns - t0) / NS
            if face.crop_jpeg and ids[face.face_id] not in crops:
                crops[ids[face.face_id]] = face.crop_jpeg
        lines += [f"<{face_id}> visible from {a:.1f} to {b:.1f}" for face_id, (a, b) in seen.items()]
        for voice in sorted(clip.voices, key=lambda v: v.start_ns):
            text = voice.transcript.strip() or "(unintelligible)"
            start, end = (voice.start_ns - t0) / NS, (voice.end_ns - t0) / NS
            lines.append(f'<{ids[voice.voice_id]}> from {start:.1f} to {end:.1f}: "{text}"')
        for match in clip.matches:
            if match.id1 in ids and match.id2 in ids:
                lines.append(
                    f"<{ids[match.id1]}> and <{ids[match.id2]}> co-occur (confidence {match.confidence:.2f}, "
                    f"{match.evidence_count} observations)"
                )
        content: list[dict] = [{"type": "text", "text": "\n".join(lines)}]
        if self.send_crops:
            for face_id, jpeg in crops.items():
                content.append({"type": "text", "text": f"<{face_id}>:"})
                url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
                content.append({"type": "image_url", "image_url": {"url": url}})
        return content

    def _post(self, messages: list[dict]) -> str:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0.0}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            data = json.loads(response.read().decode("utf-8"))
        return str(data["choices"][0]["message"]["content"] or "")

    def memorize(self, clip: ClipEvidence, ids: dict[str, str], person_of) -> MemorizerOutput:
        messages = [{"role": "system", "content": self.prompt}, {"role": "user", "content": self.describe(clip, ids)}]
        problems: list[str] = []
        for attempt in range(self.max_retries):
            try:
                reply = self._post(messages)
            except (urllib.error.URLError, TimeoutError, OSError, KeyError, IndexError, ValueError) as error:
                problems.append(f"attempt {attempt + 1}: {type(error).__name__}: {error}")
                time.sleep(min(0.2 * 2**attempt, 2.0))
                continue
            parsed = parse_memories(reply)
            if parsed is not None:
                return self._output(clip, ids, *parsed)
            problems.append(f"attempt {attempt + 1}: reply is not the JSON object asked for: {reply[:200]!r}")
            messages = [
                *messages,
                {"role": "assistant", "content": reply},
                {"role": "user", "content": 'Reply with only the JSON object {"episodic": [...], "semantic": [...]}.'},
            ]
        raise MemorizerError(f"memorizer endpoint {self.url} failed for clip {clip.clip_index}: " + "; ".join(problems))

    @staticmethod
    def _output(clip: ClipEvidence, ids: dict[str, str], episodic: list[str], semantic: list[str]) -> MemorizerOutput:
        out = MemorizerOutput()
        out.drafts += [MemoryDraft(KIND_EPISODIC, text, clip.start_ns, clip.end_ns) for text in episodic]
        out.drafts += [MemoryDraft(KIND_SEMANTIC, text, clip.start_ns, clip.end_ns) for text in semantic]
        known = set(ids.values())
        for match in clip.matches:  # perception's evidence unites persons whatever the model says
            if match.id1 in ids and match.id2 in ids:
                out.equivalences.append((ids[match.id1], ids[match.id2], match.confidence, match.evidence_count))
        for text in semantic:
            if (m := _EQUIVALENCE.match(text)) and {m.group(1), m.group(2)} <= known:
                out.equivalences.append((m.group(1), m.group(2), 1.0, 1))
            if (m := _NAMED.match(text)) and m.group(1) in known:
                out.names.append((m.group(1), m.group(2)))
        return out
