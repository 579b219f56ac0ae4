"""The `openai` memorizer: any OpenAI-compatible chat endpoint (llama.cpp's server with a small
local model, vLLM serving M3-Agent-Memorization or Qwen2.5-Omni, a hosted model) turns a clip's
evidence into names, semantic facts and episodic events.

- What the model sees is built by clip_prompt: compact text, plus keyframes and face crops for a
  vision model (`keyframes` > 0). The system prompt is a file the user can replace.
- The reply is constrained by `response_format` (a JSON schema whose labels are this clip's), so a
  constrained decoder always returns the expected shape; it is parsed leniently anyway (servers
  without constraints, code fences, prose around the object).
- Names come from the model as (line, name, whose) items and from name_roles' cue words (what the
  rules memorizer uses), merged: the cue words' role wins where both read a name, so this path
  places every name the rules place. name_mentions finds the label from the turns. A model's name
  is kept only if it was said on that line (a small model copies names from its prompt's
  examples); each is one vote for the person's name. Names of the clip's people in the model's
  facts are written as their labels, so a fact follows its person when a misheard name is
  outvoted later; what an introduction says about its person is added from the cue words, what a
  line says about the one it is said to from the turns (listener_facts), and a model fact that says
  the same of someone else is dropped. A fact made from a line its speaker said of themselves ("I'll
  bring the eggs") is that speaker's, whatever label the model wrote (fact_owner).
- With `verbatim` (default) who was seen, every utterance and perception's equivalences are stored
  as they are (as the rules memorizer does) and the model writes only what needs understanding:
  a short reply is what makes a small model on 2 cores keep up with the stream.
- Failures are typed: MemorizerUnavailable (server down, overloaded, timing out: worth waiting
  for) and MemorizerError (it answered, but unusably after the retries). The caller decides; the
  ingest worker waits for the first and stores the second marked as degraded.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from m3_memory.graph.memory_graph import MemorizerOutput
from m3_memory.graph.records import KIND_EPISODIC, KIND_SEMANTIC, ClipEvidence, MemoryDraft
from m3_memory.graph.tags import TAG_RE, tags_in
from m3_memory.memorize.clip_prompt import MODEL_ROLES, ClipView, add_images, describe, reply_schema
from m3_memory.memorize.fact_owner import asked_not_said, owned, speaker_for_name
from m3_memory.memorize.grounding import WORD_RE, copied, grounded
from m3_memory.memorize.json_reply import first_json_object, response_format
from m3_memory.memorize.listener_facts import listener_facts
from m3_memory.memorize.name_mentions import cue_facts, cue_mentions, labelled_text, merge_mentions, resolve_mentions
from m3_memory.memorize.name_roles import clean_name
from m3_memory.memorize.rules import RulesMemorizer

DEFAULT_PROMPT = Path(__file__).with_name("prompts") / "memorize.txt"
_EQUIVALENCE = re.compile(r"^\s*equivalence:\s*<((?:face|voice)_\d+)>\s*,\s*<((?:face|voice)_\d+)>", re.IGNORECASE)
_NAMED = re.compile(r"^\s*<((?:face|voice)_\d+)> is called ([A-Z][\w'-]+)\.?\s*$")
_RETRY_LATER = {408, 425, 429, 500, 502, 503, 504}  # HTTP statuses of a server that may recover
log = logging.getLogger(__name__)


class MemorizerError(RuntimeError):
    """The model answered, but no usable memories came out of it for this clip."""


class MemorizerUnavailable(MemorizerError):
    """The endpoint could not be reached or did not answer in time (worth retrying later)."""


@dataclass
class ModelReply:
    """A parsed reply: names said on a line as (line, name, whose), names of labels the reference
    model's way as (label id without brackets, name), facts and events as text."""

    mentions: list[tuple[int, str, str]] = field(default_factory=list)
    names: list[tuple[str, str]] = field(default_factory=list)
    semantic: list[str] = field(default_factory=list)
    episodic: list[str] = field(default_factory=list)


def _strings(value) -> list[str] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return None
    return [str(v).strip() for v in value if isinstance(v, (str, int, float)) and str(v).strip()]


def parse_reply(reply: str) -> ModelReply | None:
    """The reply's names, semantic and episodic lists (missing ones are empty); None when it is not
    a JSON object of that shape. Names may also come the reference model's way, as semantic lines
    "<voice_2> is called NAME."."""
    data = first_json_object(reply)
    if data is None:
        return None
    semantic, episodic = _strings(data.get("semantic", [])), _strings(data.get("episodic", []))
    names_value = data.get("names", [])
    if semantic is None or episodic is None or not isinstance(names_value, list):
        return None
    mentions = []
    for item in names_value:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item.get("whose") in MODEL_ROLES:
            line = item.get("line")
            if isinstance(line, int) and not isinstance(line, bool):
                mentions.append((line, item["name"].strip(), item["whose"]))
    names = [(m.group(1), m.group(2)) for text in semantic if (m := _NAMED.match(text))]
    semantic = [text for text in semantic if not _NAMED.match(text)]
    return ModelReply(mentions, names, semantic, episodic)


def _said(word: str, transcript: str) -> bool:
    """The word occurs in the transcript; capitalised, when the recogniser writes case (Whisper does,
    and writes names capitalised): a small model also offers common nouns as names ("Umbrella")."""
    if not any(c.isupper() for c in transcript):
        return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", transcript, re.IGNORECASE) is not None
    pattern = rf"(?<!\w){re.escape(word[0].upper())}(?i:{re.escape(word[1:])})(?!\w)"
    return re.search(pattern, transcript) is not None


def said_name(name: str, transcripts: list[str]) -> str | None:
    """The name as it should be stored, if every word of it was said (as a name) in the clip; else None."""
    words = name.split()
    if not 1 <= len(words) <= 3 or any(not WORD_RE.fullmatch(w) for w in words):
        return None
    if clean_name(words[0], cased=False) is None:  # "Mum", "Sorry": words the cue words never take for names
        return None
    if not all(any(_said(w, t) for t in transcripts) for w in words):
        return None
    if not (name.islower() or name.isupper()):
        return " ".join(words)  # the model's own capitalisation ("Rosa del Mar")
    return " ".join(w[0].upper() + w[1:].lower() for w in words)


class OpenAIMemorizer:
    """Chat-completions client; one request per clip with speech or images (plus bounded retries)."""

    name = "openai"

    def __init__(
        self,
        endpoint: str,
        model: str,
        prompt_file: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        response_format: str = "json_object",
        keyframes: int = 0,
        image_max_px: int = 512,
        verbatim: bool = True,
        max_tokens: int = 512,
        equivalence_min_confidence: float = 0.5,
        equivalence_min_evidence: int = 1,
    ) -> None:
        if not endpoint:
            raise ValueError("memorizer 'openai' needs openai_endpoint (e.g. http://localhost:8000/v1)")
        if not model:
            raise ValueError("memorizer 'openai' needs openai_model")
        path = Path(prompt_file) if prompt_file else DEFAULT_PROMPT
        if not path.is_file():
            raise ValueError(f"memorizer prompt file not found: {path}")
        _response_format(response_format, {})  # an unknown form fails at start-up
        self.response_format = response_format
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.model = model
        self.prompt = path.read_text(encoding="utf-8")
        self.api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        self.timeout_s = timeout_s
        self.max_retries = max(1, int(max_retries))
        self.keyframes = max(0, int(keyframes))
        self.image_max_px = image_max_px
        self.verbatim = verbatim
        self.max_tokens = max_tokens
        self.min_confidence = equivalence_min_confidence
        self.min_evidence = equivalence_min_evidence
        self.recorder = RulesMemorizer(equivalence_min_confidence, equivalence_min_evidence, understand=False)
        self.calls = 0
        self.call_seconds = 0.0
        self.tokens = {"prompt": 0, "completion": 0}

    def warm_up(self) -> None:
        """One 1-token request with the system prompt: a server with a prompt cache (llama.cpp) then
        reuses it for every clip, and the first clip does not wait for it to be read beside perception
        (800 tokens: 10 s alone, 50 s beside perception on 2 cores). MemorizerUnavailable when the
        server cannot be reached; a reply's content does not matter."""
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": self.prompt}, {"role": "user", "content": ""}],
            "temperature": 0.0,
            "max_tokens": 1,
        }
        try:
            self._post(body)
        except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException, ValueError) as error:
            raise MemorizerUnavailable(f"memorizer endpoint {self.url}: warm-up failed: {error}") from error

    def fact_reader(self):
        """The model reading what a statement states, for supersession (memorize/fact_reader.py), over
        this memorizer's endpoint, model and reply constraint."""
        from m3_memory.memorize.fact_reader import ModelFactReader

        return ModelFactReader(self._post, self.model, self.response_format)

    def memorize(self, clip: ClipEvidence, ids: dict[str, str], person_of, name_of=None) -> MemorizerOutput:
        """The clip's memories; raises MemorizerUnavailable / MemorizerError (nothing is made up)."""
        view = describe(clip, ids, person_of, name_of or (lambda e: ""), self.min_confidence, self.min_evidence)
        add_images(view, clip, ids, self.keyframes, self.image_max_px)
        out = self.recorder.memorize(clip, ids, person_of) if self.verbatim else self._matches(clip, ids)
        if not view.transcripts and not view.images and self.verbatim:
            return out  # nothing said, nothing shown: the verbatim record is all there is to keep
        reply = self._ask(view, clip.clip_index)
        self._merge(out, reply, view, clip)
        return out

    def _matches(self, clip: ClipEvidence, ids: dict[str, str]) -> MemorizerOutput:
        """Perception's face-voice evidence unites persons whatever the model says."""
        out = MemorizerOutput()
        for match in clip.matches:
            if match.id1 in ids and match.id2 in ids:
                out.equivalences.append((ids[match.id1], ids[match.id2], match.confidence, match.evidence_count))
        return out

    def request_body(self, view: ClipView, temperature: float = 0.0) -> dict:
        """The chat-completions request for one clip (the schema's label enum is the clip's labels)."""
        body: dict = {
            "model": self.model,
            "messages": [{"role": "system", "content": self.prompt}, {"role": "user", "content": view.content()}],
            "temperature": temperature,
            "max_tokens": self.max_tokens,
        }
        max_episodic = 4 if view.images else 2
        form = _response_format(self.response_format, reply_schema(len(view.turns.texts), max_episodic=max_episodic))
        if form is not None:
            body["response_format"] = form
        return body

    def _ask(self, view: ClipView, clip_index: int) -> ModelReply:
        problems: list[str] = []
        answered = False
        for attempt in range(self.max_retries):
            # A retry after an unusable reply samples a little, so it does not repeat the same reply.
            body = self.request_body(view, temperature=0.0 if not answered else 0.5)
            try:
                text = self._post(body)
            except urllib.error.HTTPError as error:
                problems.append(f"attempt {attempt + 1}: HTTP {error.code}: {_error_text(error)}")
                if error.code not in _RETRY_LATER:
                    raise MemorizerError(self._failure(clip_index, problems)) from error
                self._pause(attempt)
                continue
            except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException, ValueError) as error:
                problems.append(f"attempt {attempt + 1}: {type(error).__name__}: {error}")
                self._pause(attempt)
                continue
            answered = True
            parsed = parse_reply(text)
            if parsed is not None:
                return parsed
            problems.append(f"attempt {attempt + 1}: reply is not the JSON object asked for: {text[:200]!r}")
        failure = self._failure(clip_index, problems)
        raise MemorizerError(failure) if answered else MemorizerUnavailable(failure)

    def _pause(self, attempt: int) -> None:
        """A short backoff between attempts (none after the last: the caller waits its own way)."""
        if attempt + 1 < self.max_retries:
            time.sleep(min(0.5 * 2**attempt, 4.0))

    def _failure(self, clip_index: int, problems: list[str]) -> str:
        return f"memorizer endpoint {self.url} failed for clip {clip_index}: " + "; ".join(problems)

    def _post(self, body: dict) -> str:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            reply = json.loads(response.read().decode("utf-8"))
        self.calls += 1
        self.call_seconds += time.perf_counter() - started
        usage = reply.get("usage") or {}
        self.tokens["prompt"] += int(usage.get("prompt_tokens") or 0)
        self.tokens["completion"] += int(usage.get("completion_tokens") or 0)
        try:
            return str(reply["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as error:
            raise ValueError(f"no choices[0].message.content in the reply: {str(reply)[:200]}") from error

    def _merge(self, out: MemorizerOutput, reply: ModelReply, view: ClipView, clip: ClipEvidence) -> None:
        """Checked model conclusions into out: names said where the model says, of people in the clip;
        texts whose tags are the clip's labels and, for a clip only heard, whose words were said, with
        its people's names written as labels; the rest is dropped (and logged)."""
        labels = {label.strip("<>") for label in view.labels}
        cues = cue_mentions(view.turns)
        placed = self._names(reply, view, cues, clip.clip_index)
        names = list(dict.fromkeys((label, name) for _, name, label in placed if label in labels))
        # The model's own label for a name only counts for a name the cue words read on no line: where
        # they did, the turns placed it (or, for someone mentioned or absent, gave it to no one), and the
        # small model's label is the reading that gives an addressed name to the speaker.
        read = {name.casefold() for _, name, _, _ in cues} | {name.casefold() for _, name, _ in placed}
        names += [
            (label, name)
            for label, raw in reply.names
            if (name := said_name(raw, view.transcripts)) and name.casefold() not in read
        ]
        names = [pair for pair in dict.fromkeys(names) if pair[0] in labels]
        out.names.extend(names)
        texts = {d.text for d in out.drafts}
        written = [(KIND_SEMANTIC, t) for t in reply.semantic] + [(KIND_EPISODIC, t) for t in reply.episodic]
        known = {name.casefold() for name in [*(n for _, n in names), *view.known.values()]}
        written = [(kind, speaker_for_name(t, view.turns, known)) for kind, t in written]  # the model's "I" as a name
        if not view.images:  # heard only: a fact must be made of what was said
            unfounded = [t for _, t in written if not (_EQUIVALENCE.match(t) or grounded(t, view.transcripts))]
            if unfounded:
                log.info("clip %d: dropped, not said: %s", clip.clip_index, unfounded)
            written = [(kind, t) for kind, t in written if t not in unfounded]
        if self.verbatim:  # the lines are stored as said: a fact that only repeats one is dropped
            written = [(kind, t) for kind, t in written if not copied(t, view.transcripts)]
        relabel = _labels_by_name([*names, *view.known.items()], view.turns.group)
        lines = [(kind, owned(labelled_text(t, relabel), view.turns)) for kind, t in written]
        if asked := [t for _, t in lines if asked_not_said(t, view.turns)]:
            log.info("clip %d: dropped, only asked: %s", clip.clip_index, asked)
            lines = [(kind, t) for kind, t in lines if t not in asked]
        facts = [fact for _, fact in cue_facts(view.turns, cues, placed) + listener_facts(view.turns)]
        lines = [(kind, t) for kind, t in lines if not _said_of_another(t, facts)]
        lines += [(KIND_SEMANTIC, f"<{label}> is called {name}.") for label, name in names]
        lines += [(KIND_SEMANTIC, fact) for fact in facts]
        for kind, text in lines:
            if text in texts or not set(tags_in(text)) <= labels:
                continue
            if kind == KIND_SEMANTIC and (m := _EQUIVALENCE.match(text)):
                if self.verbatim:
                    continue  # equivalences come from perception's evidence, recorded already
                out.equivalences.append((m.group(1), m.group(2), 1.0, 1))
            texts.add(text)
            out.drafts.append(MemoryDraft(kind, text, clip.start_ns, clip.end_ns))

    @staticmethod
    def _names(
        reply: ModelReply, view: ClipView, cues: list[tuple[int, str, str, str]], clip_index: int
    ) -> list[tuple[int, str, str]]:
        """(line, name, label id) for each name the cue words or the model read on a line where it
        was said, merged (the cue words' role wins) and placed by the turns."""
        texts = view.turns.texts
        said = [
            (line, name, whose)
            for line, raw, whose in reply.mentions
            if 1 <= line <= len(texts) and (name := said_name(raw, [texts[line - 1]])) is not None
        ]
        merged = merge_mentions([(line, name, role) for line, name, role, _ in cues], said, texts)
        placed = resolve_mentions(view.turns, merged)
        if len(said) < len(reply.mentions) or len(placed) < len(merged):
            log.info(
                "clip %d: names placed %s of the model's %s and the cue words' %s (not said on that line, "
                "someone absent, or nobody to give them to)",
                clip_index,
                placed,
                reply.mentions,
                [cue[:3] for cue in cues],
            )
        return placed


def _said_of_another(text: str, facts: list[str]) -> bool:
    """The text says what a cue-word fact says, about another label ("<voice_1> is the new nurse."
    where the nurse introduced herself on <voice_2>'s line)."""
    bare = " ".join(TAG_RE.sub(" ", text).lower().split()).strip(" .")
    return any(text != fact and bare == " ".join(TAG_RE.sub(" ", fact).lower().split()).strip(" .") for fact in facts)


def _labels_by_name(named: list[tuple[str, str]], group: dict[str, str]) -> dict[str, str]:
    """name -> label id, for names that belong to one person of the clip (a name two people share is
    left as written)."""
    people: dict[str, set[str]] = {}
    label: dict[str, str] = {}
    for entity_id, name in named:
        people.setdefault(name, set()).add(group.get(entity_id, entity_id))
        label.setdefault(name, entity_id)
    return {name: label[name] for name, who in people.items() if len(who) == 1}


def _error_text(error: urllib.error.HTTPError) -> str:
    try:
        return error.read().decode("utf-8", "replace")[:300]
    except OSError:
        return str(error)


def _response_format(kind: str, schema: dict) -> dict | None:
    return response_format(kind, schema, "clip_memory", "openai_response_format")
