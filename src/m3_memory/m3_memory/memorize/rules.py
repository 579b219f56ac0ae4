"""The `rules` memorizer: deterministic episodic and semantic memories from perception evidence alone.

Episodic: who was seen ("<face_1> is seen."), who said what ("<voice_2> says: \"...\""), and the objects and
written text seen (memorize.seen).
Semantic: face↔voice equivalences from EntityMatch evidence, names read by name_roles' cue words
(self, introduced, addressed; a `mentioned` name names nobody) and placed by the turns
(name_mentions, the same placement the model memorizer uses), what an introduction says about its
person, facts people state about themselves (a restated fact reinforces the stored one) and about the one
they speak to (listener_facts: "I know you hate mushrooms").
A line without a voice id (speaker uncertain) is stored as said and gives no name and no fact.
"""

from __future__ import annotations

import re

from m3_memory.graph.memory_graph import MemorizerOutput
from m3_memory.graph.records import (
    KIND_EPISODIC,
    KIND_FACE,
    KIND_SEMANTIC,
    KIND_VOICE,
    ClipEvidence,
    MemoryDraft,
)
from m3_memory.graph.tags import kind_of
from m3_memory.memorize.clip_prompt import describe
from m3_memory.memorize.english import is_adverb, third_person
from m3_memory.memorize.listener_facts import listener_facts
from m3_memory.memorize.name_mentions import cue_facts, cue_mentions, resolve_mentions
from m3_memory.memorize.name_roles import find_mentions
from m3_memory.memorize.seen import seen_drafts

FACT_OBJECT_STARTS = frozenset("a an from allergic married vegetarian vegan".split())
UNCLEAR = "Someone (voice unclear)"  # the speaker of a line without a voice id


def said(tag: str, text: str) -> str:
    """The episodic line of an utterance: `<tag> says: "text"`, UNCLEAR as the speaker without a tag."""
    who = f"<{tag}>" if tag else UNCLEAR
    return f'{who} says: "{text}"'


def names_in(transcript: str) -> tuple[list[str], list[str]]:
    """(names the speaker gives themself, names the speaker addresses or introduces)."""
    mentions = find_mentions(transcript)
    own = [m.name for m in mentions if m.role == "self"]
    return own, [m.name for m in mentions if m.role in ("addressed", "introduced")]


def vocatives_in(transcript: str) -> list[str]:
    """Names the speaker calls out to someone ("thanks carol. do you ..."): they name the next speaker."""
    return [m.name for m in find_mentions(transcript) if m.role == "addressed"]


def _reflect(rest: str) -> str:
    """First person to third person in the rest of a clause."""
    rest = re.sub(r"\bmyself\b", "themselves", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bmy\b", "their", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bme\b", "them", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bmine\b", "theirs", rest, flags=re.IGNORECASE)
    return rest


def self_facts(transcript: str, speaker_tag: str) -> list[str]:
    """Facts a speaker states about themself, rewritten about the speaker's tag."""
    facts = []
    for clause in re.split(r"[.!;]+|,\s*(?:and|but)\s+|\s+and\s+(?=i\b)", transcript, flags=re.IGNORECASE):
        clause = clause.strip().rstrip(",")
        if not clause or clause.endswith("?"):
            continue
        clause = re.sub(r"^(?:(?:and|so|well|oh|um|uh|also|yes|yeah|actually),?\s+)+", "", clause, flags=re.IGNORECASE)
        match = re.match(r"^i (\w+)(?: (\w+))?\s+(.+)$", clause, flags=re.IGNORECASE)
        if match:
            first, second, rest = match.group(1), match.group(2), match.group(3)
            if second and second.lower() in ("you", "your", "you're"):
                continue  # "I know you hate onions" is about the listener (listener_facts)
            if first.lower() in ("am", "was", "will", "would", "could", "should", "can", "think", "guess", "mean"):
                if first.lower() == "am" and second and second.lower() in FACT_OBJECT_STARTS:
                    facts.append(f"{speaker_tag} is {second.lower()} {_reflect(rest)}.")
                continue
            if is_adverb(first) and second:
                text = f"{speaker_tag} {first.lower()} {third_person(second)} {_reflect(rest)}"
            else:
                text = f"{speaker_tag} {third_person(first)} {_reflect(f'{second} {rest}' if second else rest)}"
            facts.append(text.strip() + ".")
            continue
        match = re.match(r"^i'm (\w+)\s+(.+)$", clause, flags=re.IGNORECASE)
        if match and match.group(1).lower() in FACT_OBJECT_STARTS:
            facts.append(f"{speaker_tag} is {match.group(1).lower()} {_reflect(match.group(2))}.")
            continue
        match = re.match(r"^my (.+?) (is|are) (.+)$", clause, flags=re.IGNORECASE)
        if match:
            facts.append(
                f"The {match.group(1).lower()} of {speaker_tag} {match.group(2).lower()} {_reflect(match.group(3))}."
            )
    return facts


class RulesMemorizer:
    """Deterministic memorizer: same evidence in, same memories out."""

    name = "rules"

    def __init__(
        self, equivalence_min_confidence: float = 0.5, equivalence_min_evidence: int = 1, understand: bool = True
    ) -> None:
        """understand=False keeps only the record of the evidence (who was seen, who said what,
        equivalences): the openai memorizer stores that verbatim and leaves names and facts to its model."""
        self.min_confidence = equivalence_min_confidence
        self.min_evidence = equivalence_min_evidence
        self.understand = understand

    def warm_up(self) -> None:
        """Nothing to prepare: the rules need no model."""

    def memorize(self, clip: ClipEvidence, ids: dict[str, str], person_of, name_of=None) -> MemorizerOutput:
        """ids maps every perception id of the clip (and of its matches) to memory ids; person_of
        gives the stored person of a memory id (None for entities created by this clip); name_of
        (a known person's name) is not used by these rules."""
        out = MemorizerOutput()
        first_seen: dict[str, list[int]] = {}
        for face in sorted(clip.faces, key=lambda f: (f.stamp_ns, f.face_id)):
            span = first_seen.setdefault(ids[face.face_id], [face.stamp_ns, face.stamp_ns])
            span[1] = max(span[1], face.stamp_ns)
        for face_id, (start, end) in first_seen.items():
            out.drafts.append(MemoryDraft(KIND_EPISODIC, f"<{face_id}> is seen.", start, end))
        out.drafts.extend(seen_drafts(clip, ids))  # objects and written text (memorize.seen)

        # equivalence evidence: strongest report per pair inside this clip
        pairs: dict[tuple[str, str], tuple[float, int]] = {}
        for match in clip.matches:
            if match.id1 not in ids or match.id2 not in ids:
                continue
            a, b = sorted((ids[match.id1], ids[match.id2]), key=lambda e: (kind_of(e) != KIND_FACE, e))
            old = pairs.get((a, b), (0.0, 0))
            pairs[(a, b)] = (max(old[0], match.confidence), max(old[1], match.evidence_count))
        for (a, b), (confidence, count) in sorted(pairs.items()):
            out.equivalences.append((a, b, confidence, count))
            if confidence >= self.min_confidence and count >= self.min_evidence:
                if {kind_of(a), kind_of(b)} == {KIND_FACE, KIND_VOICE}:
                    out.drafts.append(
                        MemoryDraft(KIND_SEMANTIC, f"Equivalence: <{a}>, <{b}>", clip.start_ns, clip.end_ns)
                    )

        voices = [v for v in sorted(clip.voices, key=lambda v: (v.start_ns, v.segment_id)) if v.transcript.strip()]
        turns = describe(clip, ids, person_of, lambda e: "", self.min_confidence, self.min_evidence).turns
        cues = cue_mentions(turns) if self.understand else []
        placed = resolve_mentions(turns, [(line, name, role) for line, name, role, _ in cues])
        facts = cue_facts(turns, cues, placed) + (listener_facts(turns) if self.understand else [])
        for number, voice in enumerate(voices, 1):
            tag = ids.get(voice.voice_id, "")
            text = voice.transcript.strip()
            out.drafts.append(MemoryDraft(KIND_EPISODIC, said(tag, text), voice.start_ns, voice.end_ns))
            if not self.understand or not tag:
                continue  # an unclear speaker's line is kept as said; whose facts they are waits
            for _, name, label in (p for p in placed if p[0] == number):
                out.names.append((label, name))
                named = f"<{label}> is called {name}."
                out.drafts.append(MemoryDraft(KIND_SEMANTIC, named, voice.start_ns, voice.end_ns))
            for fact in dict.fromkeys([f for line, f in facts if line == number] + self_facts(text, f"<{tag}>")):
                out.drafts.append(MemoryDraft(KIND_SEMANTIC, fact, voice.start_ns, voice.end_ns))
        return out
