"""Whose name was said: the model reads a line, the turns tell who that is.

A small model reads one line fairly well ("I'm Ana": the speaker's own name; "thanks, Ana": the one
addressed; "this is Ana": someone introduced) but often picks the wrong one of a clip's <face_N> and
<voice_N> labels for it ("Omar, did you...?" gave Omar to the speaker). Measured with the embedded
Qwen2.5-Coder-1.5B on 11 short scenes written for this (other names than the demo's): labels chosen
by the model put 8 of 14 names on the right person; line and role placed here, 9 of 12 (README of
m3_memory). So the model names the line and the role, and
the label follows from the turns, as conversation analysis describes them: a name said to someone
selects the next speaker (Sacks, Schegloff & Jefferson 1974). The one spoken to is the next other
person who talks in the clip, else the one who talked before, else the only other person seen while
the line was said. Someone introduced is the next other person who talks, leaving out that line's
listener, else the only other person seen: never the one who talked before, since an introduction
presents someone new to the talk, who answers it (a doctor's "Reception, this is Doctor Tanaka" on
the intercom, the clip's last line, gave his name to the patient who had spoken before).
Each mention is one vote for a name (graph_people), so one misheard name is outvoted by the others.

The roles come from two readers: name_roles (cue words; both memorizers) and, with `--llm embedded`,
the model. `merge_mentions` keeps each (line, name) once and takes the cue words' role where they
have one, so the model path places every name the rules place, and a name the cues read as
`mentioned` (someone absent) is given to nobody whatever the model says.

A line whose speaker is uncertain (no voice id: a piece too short to tell, or overlapped speech)
gives no vote in any role. `self` has nobody to go to; `addressed` and `introduced` would go to the
next other speaker, but "other" than whom? A piece too short to tell is mostly the head or tail of a
neighbour's turn (a welcome cut in two founded a voice of its own in issue 20's households): if it
was the next speaker's own start, the name belongs to the one before. No order of turns tells the
two apart, so the name waits until a line with a known speaker says it again. Likewise a name said
to someone whose answer is uncertain is not placed on whoever talks after that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from m3_memory.graph.records import LineBefore
from m3_memory.memorize.name_roles import ROLES, SPEAKER, find_mentions, is_cased

TURN_GAP_NS = 10_000_000_000  # an answer starting this long after the line no longer answers it
UNCERTAIN = ""  # the speaker of a line without a voice id
# A line that opens by answering ("thanks, Rosa", "yes, Omar", "sorry, Ana") speaks to the one who just
# talked, not to the next speaker: thanking and answering respond to a turn, they do not open one.
RESPONSE = re.compile(
    r"^\W*(?:thanks|thank you|cheers|yes|yeah|no|okay|ok|sure|right|sorry|of course|you're welcome|fine|"
    r"good|great|alright|all right)\b",
    re.I,
)
THIRD_PERSON = re.compile(r"^\W*(?:(?:no|yes|sorry|oh|um|uh|well),?\s+)*(?:he|she|they)(?:'s|'re|'ll|\s)", re.I)


@dataclass
class Turns:
    """The clip's speech lines in order, as the model saw them numbered from 1."""

    speakers: list[str] = field(default_factory=list)  # label id of each line's speaker (voice_N)
    seen_with: list[list[str]] = field(default_factory=list)  # per line: other people's labels seen meanwhile
    texts: list[str] = field(default_factory=list)  # per line: what was said
    group: dict[str, str] = field(default_factory=dict)  # label id -> the clip's id for its person
    starts: list[int] = field(default_factory=list)  # per line: start (ns); empty: times unknown
    ends: list[int] = field(default_factory=list)  # per line: end (ns)
    present: list[str] = field(default_factory=list)  # every label in the clip (the last resort below)
    before: LineBefore | None = None  # the previous clip's last line (a question it asked may be answered here)

    def person(self, label: str) -> str:
        """The clip's id for the person of a label (a label of its own when alone)."""
        return self.group.get(label, label)

    def whose(self, line: int, role: str, listener: str | None = None, answering: bool | None = None) -> str | None:
        """The label id the name said in `line` (1-based) in `role` belongs to; None when the turns
        cannot tell (an uncertain speaker; nobody else talks, is seen or is in the clip; several
        people are seen and none talks), and for `mentioned` (someone absent). `answering`: whether
        the words answer the previous speaker (None: whether the line opens as an answer does)."""
        if not 1 <= line <= len(self.speakers) or role not in ROLES or role == "mentioned":
            return None
        i = line - 1
        if self.speakers[i] == UNCERTAIN:
            return None  # see the module docstring
        if role == "self":
            return self.speakers[i]
        excluded = {self.person(self.speakers[i])}
        if role == "introduced" and listener is not None:
            excluded.add(self.person(listener))
        after = [j for j in range(i + 1, len(self.speakers)) if not self.late(i, j)]
        before = list(range(i - 1, -1, -1))
        order = (after, before) if role == "addressed" else (after,)  # see the module docstring
        if role == "addressed" and (self._responds(i) if answering is None else answering):  # the one just before
            order = ([j for j in before if not self.late(j, i)], after, before)
        for candidates in order:
            found = next((j for j in candidates if self.person(self.speakers[j]) not in excluded), None)
            if found is not None and role == "addressed" and found > i and self._for_someone_else(found):
                return None  # "Zeynep!" / "She's still asleep": the one who answers is not the one called
            if found is not None:
                return None if self.speakers[found] == UNCERTAIN else self.speakers[found]
        seen = {self.person(e): e for e in self.seen_with[i] if self.person(e) not in excluded}
        if seen:
            return next(iter(seen.values())) if len(seen) == 1 else None
        others = {self.person(e): e for e in self.present if e and self.person(e) not in excluded}
        return next(iter(others.values())) if len(others) == 1 else None

    def _responds(self, i: int) -> bool:
        """Line i opens with an answer or thanks ("Thanks, Rosa."): its name is the previous speaker's."""
        return bool(self.texts) and RESPONSE.match(self.texts[i]) is not None

    def _for_someone_else(self, j: int) -> bool:
        """Line j answers in the third person ("she's asleep", "he left"): it speaks for the one called."""
        return bool(self.texts) and THIRD_PERSON.match(self.texts[j]) is not None

    def late(self, i: int, j: int) -> bool:
        """Line j starts too long after line i to answer it (times known)."""
        return bool(self.starts) and self.starts[j] - self.ends[i] > TURN_GAP_NS


# A line that gives the speaker's own name says it next to the speaker ("I'm Ana", "call me Ana", "my
# name's Ana", "Ana, that's me": a word for the speaker within SELF_REACH words of the name, in its
# sentence) or announces them ("Ana here", "Ana speaking": those words right after the name, since
# "Ana, come here" calls Ana); without it a name the model read as the speaker's is said to or of
# someone (the 1.5B model gave a name called out, "Ravi, Sunita, lift the table", to the speaker, and
# the one greeted in "Hello dear, Hana, this is Jonas, my husband" to its speaker). A bare "my" is no
# such word: "my husband Jonas" presents someone else.
SELF_WORDS = frozenset({"i", "i'm", "im", "me", "myself", "name", "name's"})
SELF_REACH = 3
_SENTENCES = re.compile(r"[^.!?]+")
_WORDS = re.compile(r"[\w']+")


def speaks_as(text: str, name: str) -> bool:
    """Whether `text` can give `name` as its speaker's own: a word for the speaker near it, or "<name> here"."""
    if re.search(rf"\b{re.escape(name)}\W+(?:here|speaking)\b", text, re.I):
        return True
    parts = name.lower().split()
    for sentence in _SENTENCES.findall(text):
        words = [w.lower().removesuffix("'s") for w in _WORDS.findall(sentence)]
        for at in (k for k in range(len(words)) if words[k : k + len(parts)] == parts):
            near = words[max(0, at - SELF_REACH) : at] + words[at + len(parts) : at + len(parts) + SELF_REACH]
            if SELF_WORDS.intersection(near):
                return True
    return False


def merge_mentions(
    structure: list[tuple[int, str, str]], model: list[tuple[int, str, str]], texts: list[str]
) -> list[tuple[int, str, str]]:
    """The cue words' mentions, then the model's on (line, name) pairs the cues did not read: where
    both read a name on a line, the cue words' role wins (they read "Omar, did you...?" as addressed
    where the 1.5B model gave Omar to the speaker). A model's `self` reading of a line (1-based in
    `texts`) that cannot give the speaker's own name is dropped (`speaks_as`)."""
    read = {(line, word) for line, name, _ in structure for word in name.lower().split()}
    merged = list(structure)
    for line, name, role in model:
        words = {(line, word) for word in name.lower().split()}
        if role == "self" and not (1 <= line <= len(texts) and speaks_as(texts[line - 1], name)):
            continue
        if not words & read:  # "Ana Lopez" where the cue words read "Ana" is the same reading
            read |= words
            merged.append((line, name, role))
    return merged


def resolve_mentions(turns: Turns, mentions: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """(line, name, label id) for each mention the turns can place, in the given order; someone
    introduced on a line where a listener is named is looked for among the others; a name said to
    someone who then gives their own, other name ("gina, can you...?" / "I'm Kim, Gina left") is not
    theirs (a name heard earlier and said back differently still votes: one of the two is misheard),
    nor is a name its person says to or of someone else in the clip ("Hi Chiara!" is not Chiara);
    a name someone gave as their own in the clip is theirs when others say it ("I'm Ana" ... "Hello, Ana"),
    and nobody else's own."""
    mentions = [(line, name, role) for line, name, role in mentions if 1 <= line <= len(turns.speakers)]
    listeners: dict[int, str] = {}
    own: dict[str, list[tuple[int, str]]] = {}  # person -> (line, name) they gave as their own
    owner: dict[str, str] = {}  # name -> label of the first who gave it as their own
    said_by: dict[str, set[str]] = {}  # name -> persons who say it to or of someone else
    for line, name, role in mentions:
        speaker = turns.speakers[line - 1]
        if role == "self" and speaker != UNCERTAIN:
            own.setdefault(turns.person(speaker), []).append((line, name))
            owner.setdefault(name, speaker)
        elif speaker != UNCERTAIN:
            said_by.setdefault(name, set()).add(turns.person(speaker))

    def whose(line: int, name: str, role: str) -> str | None:
        label = turns.whose(line, role, listeners.get(line))
        if label is None or name not in owner:
            return label
        mine = turns.person(owner[name]) == turns.person(turns.speakers[line - 1])
        if role == "self":  # two people giving one name as their own: the first reading (cue words first) holds
            return label if mine else None
        return None if mine else owner[name]

    def theirs(line: int, name: str, role: str, label: str) -> bool:
        if role == "self":
            return True
        answers = [n for later, n in own.get(turns.person(label), []) if later > line]
        return not ((answers and name not in answers) or turns.person(label) in said_by.get(name, set()))

    # The one a line speaks to is kept out of whom it introduces, unless that one is the newcomer who greets
    # back by the name ("Kenji, this is Amara." / "Hi Kenji!" is Amara answering, not Kenji).
    for line, name, role in mentions:
        label = whose(line, name, role) if role == "addressed" else None
        if label is not None and theirs(line, name, role, label):
            listeners.setdefault(line, label)
    placed = []
    for line, name, role in mentions:
        label = whose(line, name, role)
        if label is not None and theirs(line, name, role, label):
            placed.append((line, name, label))
    return placed


def cue_mentions(turns: Turns) -> list[tuple[int, str, str, str]]:
    """(line, name, role, about) for each name the cue words read on the clip's lines (name_roles)."""
    cased = any(is_cased(text) for text in turns.texts)  # the recogniser's habit, seen over the clip
    return [(i, m.name, m.role, m.about) for i, text in enumerate(turns.texts, 1) for m in find_mentions(text, cased)]


def cue_facts(
    turns: Turns, cues: list[tuple[int, str, str, str]], placed: list[tuple[int, str, str]]
) -> list[tuple[int, str]]:
    """(line, fact) for what a self-introduction or an introduction says about its person, written
    about the label the name went to ("I'm Ana, the new nurse" -> "<voice_2> is the new nurse.");
    nothing when that person or the speaker is not known."""
    where = {(line, name): label for line, name, label in placed}
    facts = []
    for line, name, role, about in cues:
        label = where.get((line, name))
        speaker = turns.speakers[line - 1]
        if not about or role not in ("self", "introduced") or label is None or (SPEAKER in about and not speaker):
            continue
        facts.append((line, f"<{label}> {about.replace(SPEAKER, f'<{speaker}>')}."))
    return facts


def labelled_text(text: str, labels_by_name: dict[str, str]) -> str:
    """The text with each name of a person in the clip written as that person's label ("Ana likes
    tea" -> "<voice_2> likes tea"), so the memory follows the person when a misheard name is later
    outvoted; names given to more than one person are left as they are (the caller leaves them out)."""
    for name, label in sorted(labels_by_name.items(), key=lambda item: -len(item[0])):
        text = re.sub(rf"(?<![\w<]){re.escape(name)}(?!\w)", f"<{label}>", text)
    return text
