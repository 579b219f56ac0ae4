"""The `rules` memorizer: deterministic episodic and semantic memories from perception evidence alone.

Episodic: who was seen ("<face_1> is seen.") and who said what ("<voice_2> says: \"...\"").
Semantic: face↔voice equivalences from EntityMatch evidence, names from self-introductions and
addressing, and facts people state about themselves (a restated fact reinforces the stored one).
"""

from __future__ import annotations

import itertools
import re

from m3_memory.graph import MemorizerOutput
from m3_memory.records import (
    KIND_EPISODIC,
    KIND_FACE,
    KIND_SEMANTIC,
    KIND_VOICE,
    ClipEvidence,
    MemoryDraft,
)
from m3_memory.tags import kind_of

# Words that follow "I'm" / "this is" / "thanks," without being a name (transcripts are often lower case).
NOT_NAMES = frozenset(
    """a an the and but or so to of in on at for with from by as is are was were be been am it its it's this that
    there here these those my your his her our their me you him them us we they i he she what who where when why how
    not no yes yeah ok okay fine good great well sorry sure glad happy sad tired busy ready done back home hungry
    thirsty late early right wrong new old very really just also too again all everyone everybody guys folks friend
    friends buddy man sir madam maam dear honey much lot so going coming looking trying doing being having getting
    sorry afraid excited bored cold hot sick alright over out up down off interesting nice cool amazing awesome
    hello hi hey thanks thank bye goodbye morning evening afternoon night tonight today tomorrow now then still only
    about like love one two three four five something nothing anything everything someone somebody anyone
    look listen wait come see guess remember honestly anyway please excuse pardon maybe actually um uh oh ah wow
    hmm married single divorced retired pregnant allergic vegetarian vegan afraid do does did can could would will
    shall should may might must has have had let tell give show help make take bring get put""".split()
)
PRESENT_VERBS = frozenset(
    """like love hate prefer enjoy want need have live work drink eat own play keep go do read watch use drive take
    wear cook study teach know remember usually""".split()
)
ADVERBS = frozenset("usually always often never really also sometimes normally still".split())
FACT_OBJECT_STARTS = frozenset("a an from allergic married vegetarian vegan".split())

_NAME = r"([A-Za-z][A-Za-z'-]{1,30})"
# A name ends at punctuation, the end, or (lower-case transcripts have no punctuation) a word that
# starts the next clause: "hi alice i'm bob i just moved in".
_CLAUSE_START = r"i|i'm|im|we|we're|and|but|so|nice|how|what|where|your|you|it's|this|here|from|just|please"
_END = r"(?=\s*(?:[.,!?;]|$|\b(?:" + _CLAUSE_START + r")\b))"
SELF_INTRO = [
    re.compile(r"\bmy name(?:'s| is) " + _NAME, re.IGNORECASE),
    re.compile(r"\bcall me " + _NAME, re.IGNORECASE),
    re.compile(r"\b(?:i'm|i am) " + _NAME + _END, re.IGNORECASE),
]
ADDRESSING = [
    re.compile(r"\b(?:this is|meet|that's|that is) " + _NAME + _END, re.IGNORECASE),
    re.compile(
        r"\b(?:thanks|thank you|hi|hello|hey|bye|goodbye|good morning|good night),? " + _NAME + _END, re.IGNORECASE
    ),
]


# A name said first, then a request or question to that person: "carol, can you ...", "carol your birthday ...".
VOCATIVE = re.compile(
    r"^(?:(?:hey|hi|hello|oh|so|okay|ok|well),?\s+)?" + _NAME + r"(?:\s*,\s*|\s+(?=(?:you|your|can you|could you|"
    r"would you|will you|do you|did you|are you|have you|this is)\b))",
    re.IGNORECASE,
)
TURN_GAP_NS = 10_000_000_000  # an answer starting this long after the question still answers it


def _clean_name(word: str) -> str | None:
    word = word.strip("'-")
    if len(word) < 2 or word.lower() in NOT_NAMES or word.lower().endswith("ing"):
        return None
    return word[0].upper() + word[1:].lower() if word.islower() or word.isupper() else word


def names_in(transcript: str) -> tuple[list[str], list[str]]:
    """(names the speaker gives themself, names the speaker addresses or introduces)."""
    own = [n for p in SELF_INTRO for m in p.finditer(transcript) if (n := _clean_name(m.group(1)))]
    others = [n for p in ADDRESSING for m in p.finditer(transcript) if (n := _clean_name(m.group(1)))]
    others = [n for n in others if n not in own]
    return own, others


def vocatives_in(transcript: str) -> list[str]:
    """Names the speaker calls out to someone they then ask or tell something ("thanks carol. do you ...")."""
    if not re.search(r"\byou\b|\byour\b|\?", transcript, re.IGNORECASE):
        return []
    sentences = re.split(r"(?<=[.!?;])\s+", transcript.strip())
    found = [n for part in sentences if (m := VOCATIVE.match(part)) and (n := _clean_name(m.group(1)))]
    found += [n for m in ADDRESSING[1].finditer(transcript) if (n := _clean_name(m.group(1)))]
    own, _ = names_in(transcript)
    return [n for n in dict.fromkeys(found) if n not in own]


def _third_person(verb: str) -> str:
    verb_l = verb.lower()
    if verb_l == "have":
        return "has"
    if verb_l in ("go", "do"):
        return verb_l + "es"
    if verb_l in PRESENT_VERBS:
        return verb_l + "s"
    return verb_l


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
            if first.lower() in ("am", "was", "will", "would", "could", "should", "can", "think", "guess", "mean"):
                if first.lower() == "am" and second and second.lower() in FACT_OBJECT_STARTS:
                    facts.append(f"{speaker_tag} is {second.lower()} {_reflect(rest)}.")
                continue
            if first.lower() in ADVERBS and second:
                text = f"{speaker_tag} {first.lower()} {_third_person(second)} {_reflect(rest)}"
            else:
                text = f"{speaker_tag} {_third_person(first)} {(second + ' ') if second else ''}{_reflect(rest)}"
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

        # equivalence evidence: strongest report per pair inside this clip
        pairs: dict[tuple[str, str], tuple[float, int]] = {}
        for match in clip.matches:
            if match.id1 not in ids or match.id2 not in ids:
                continue
            a, b = sorted((ids[match.id1], ids[match.id2]), key=lambda e: (kind_of(e) != KIND_FACE, e))
            old = pairs.get((a, b), (0.0, 0))
            pairs[(a, b)] = (max(old[0], match.confidence), max(old[1], match.evidence_count))
        groups: dict[str, str] = {}  # who is one human inside this clip (for addressing)
        for (a, b), (confidence, count) in sorted(pairs.items()):
            out.equivalences.append((a, b, confidence, count))
            if confidence >= self.min_confidence and count >= self.min_evidence:
                groups[b] = groups.get(a, a)
                if {kind_of(a), kind_of(b)} == {KIND_FACE, KIND_VOICE}:
                    out.drafts.append(
                        MemoryDraft(KIND_SEMANTIC, f"Equivalence: <{a}>, <{b}>", clip.start_ns, clip.end_ns)
                    )

        def human(entity_id: str) -> str:
            root = groups.get(entity_id, entity_id)
            return person_of(root) or root

        present: dict[str, str] = {}
        for entity_id in sorted({ids[p] for p in self._present(clip)}, key=_face_first):
            present.setdefault(human(entity_id), entity_id)
        voices = [v for v in sorted(clip.voices, key=lambda v: (v.start_ns, v.segment_id)) if v.transcript.strip()]
        turns = self._turns(voices, ids)
        addressed: set[str] = set()  # names already given to a listener in this clip
        for voice in voices:
            tag = ids[voice.voice_id]
            text = voice.transcript.strip()
            out.drafts.append(MemoryDraft(KIND_EPISODIC, f'<{tag}> says: "{text}"', voice.start_ns, voice.end_ns))
            if not self.understand:
                continue
            own, others = names_in(text)
            for name in own[:1]:
                out.names.append((tag, name))
                out.drafts.append(
                    MemoryDraft(KIND_SEMANTIC, f"<{tag}> is called {name}.", voice.start_ns, voice.end_ns)
                )
            listeners = [e for h, e in present.items() if h != human(tag)]
            if others and len(listeners) == 1:  # addressing is only attributed when unambiguous
                out.names.append((listeners[0], others[0]))
                addressed.add(others[0])
                out.drafts.append(
                    MemoryDraft(KIND_SEMANTIC, f"<{listeners[0]}> is called {others[0]}.", voice.start_ns, voice.end_ns)
                )
            for fact in self_facts(text, f"<{tag}>"):
                out.drafts.append(MemoryDraft(KIND_SEMANTIC, fact, voice.start_ns, voice.end_ns))
        if not self.understand:
            return out
        # Turn taking: a name called out with a question or request names whoever answers next.
        for (tag, text, _, end), (next_tag, _, next_start, next_end) in itertools.pairwise(turns):
            if human(next_tag) == human(tag) or next_start - end > TURN_GAP_NS:
                continue
            names = [n for n in vocatives_in(text) if n not in addressed]
            if len(names) == 1 and next_tag not in self._self_named(turns, next_tag):
                out.names.append((next_tag, names[0]))
                out.drafts.append(
                    MemoryDraft(KIND_SEMANTIC, f"<{next_tag}> is called {names[0]}.", next_start, next_end)
                )
        return out

    @staticmethod
    def _turns(voices, ids) -> list[tuple[str, str, int, int]]:
        """Consecutive segments of one speaker joined: (tag, text, start_ns, end_ns)."""
        turns: list[tuple[str, str, int, int]] = []
        for voice in voices:
            tag, text = ids[voice.voice_id], voice.transcript.strip()
            if turns and turns[-1][0] == tag:
                last = turns[-1]
                sep = " " if last[1][-1:] in ".!?," else ". "
                turns[-1] = (tag, last[1] + sep + text, last[2], max(last[3], voice.end_ns))
            else:
                turns.append((tag, text, voice.start_ns, voice.end_ns))
        return turns

    @staticmethod
    def _self_named(turns, tag: str) -> set[str]:
        """Tags that introduce themselves in this clip (their own name wins over being addressed)."""
        return {t for t, text, _, _ in turns if t == tag and names_in(text)[0]}

    @staticmethod
    def _present(clip: ClipEvidence) -> list[str]:
        return [f.face_id for f in clip.faces] + [v.voice_id for v in clip.voices]


def _face_first(entity_id: str) -> tuple[bool, str]:
    return kind_of(entity_id) != KIND_FACE, entity_id
