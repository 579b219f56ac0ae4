"""Which person names a line says, and in which of the four roles a conversation uses them.

- `self`: the speaker's own name ("I'm Ana", "my name is Ana", "everyone calls me Ana", "Ana here").
- `introduced`: someone the speaker presents ("this is Ben", "meet my sister Ben", "Ben is my sister").
- `addressed`: the one spoken to ("Priya, we need...", "thanks, Priya", "nice to meet you, Priya").
- `mentioned`: someone talked about ("tell Yusuf", "Yusuf called", "Yusuf is running late"): names nobody
  present, so it gives no vote, and it overrules a model that read the line otherwise.

Patterns, not a parser: spaCy's en_core_web_sm 3.8.0 (330 MB installed with its dependencies,
0.9-3.8 s to import and load, 2-18 ms a line here) tagged the name PERSON on 36 of 56 cased lines
of the name scenes and 2 of 6 lower-case ones (pocketsphinx writes no case), where these cue words
found 52 and 6; the role is in the cue words either way (README of m3_memory, Names).
A self-introduction or an introduction may say what the person does ("I'm Ana, the new nurse";
"this is Ben, he fixes the bikes"): that is returned with the mention, so the fact goes to the
person the name goes to. Pure logic: the memorizers place each mention on a label (name_mentions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from m3_memory.memorize.common_words import is_common_word

ROLES = ("self", "addressed", "introduced", "mentioned")
SPEAKER = "{speaker}"  # stands for the speaker's label in a fact (`about`)

# Words that follow "I'm" / "this is" / "thanks," without being a name (transcripts are often lower case).
NOT_NAMES = frozenset(
    """a an the and but or so to of in on at for with from by as is are was were be been am it its it's this that
    there here these those my your his her our their me you him them us we they i he she what who where when why how
    not no yes yeah ok okay fine good great well sorry sure glad happy sad tired busy ready done back home hungry
    thirsty late early right wrong new old very really just also too again all everyone everybody guys folks friend
    friends buddy man sir madam maam dear honey much lot so going coming looking trying doing being having getting
    sorry afraid excited bored cold hot sick alright over out up down off interesting nice cool amazing awesome
    hello hi hey thanks thank bye goodbye welcome congratulations congrats cheers morning evening afternoon night
    tonight today tomorrow now then still only
    about like love one two three four five something nothing anything everything someone somebody anyone
    look listen wait come see guess remember honestly anyway please excuse pardon maybe actually um uh oh ah wow
    hmm married single divorced retired pregnant allergic vegetarian vegan afraid do does did can could would will
    shall should may might must has have had let tell give show help make take bring get put mum mom dad mama papa
    grandma grandpa doctor nurse boss team yesterday week weekend
    monday tuesday wednesday thursday friday saturday sunday more most some any many few lots each every other
    another english british american dutch german french italian spanish polish irish scottish welsh canadian
    australian indian chinese japanese korean brazilian mexican nigerian kenyan swedish norwegian danish finnish
    greek turkish russian ukrainian portuguese swiss austrian belgian""".split()
)
RELATIONS = (
    r"(?:friend|best friend|sister|brother|wife|husband|son|daughter|mother|father|mom|mum|dad|colleague|partner|"
    r"neighbou?r|cousin|aunt|uncle|grandmother|grandfather|grandma|grandpa|boss|roommate|flatmate|niece|nephew|"
    r"girlfriend|boyfriend|fianc[eé]e?|twin|manager|assistant|new \w+)"
)
_N = r"([A-Za-z][A-Za-z'-]{1,30})"  # one word of a name
# A name ends at punctuation, the end, or (lower-case transcripts have no punctuation) a word that
# starts the next clause or a description: "hi alice i'm bob i just moved in", "i'm ana the new nurse".
_CLAUSE = r"i|i'm|im|we|we're|and|but|so|nice|how|what|where|your|you|it's|this|here|from|just|please|the|a|an|he|"
_CLAUSE += r"she|they|he's|she's|our|my|who|speaking|calling|can|could|would|will|do|did|are|is|over|there"
_END = r"(?=\s*(?:[.,!?;:]|$|\b(?:" + _CLAUSE + r")\b))"
_REL = rf"(?:(?:my|our|your|the) (?:{RELATIONS}),? )?"
_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("self", re.compile(r"\bmy name(?:'s| is) " + _N, re.I)),
    ("self", re.compile(r"\b(?:calls?|called) me " + _N, re.I)),
    ("self", re.compile(r"\b(?:i'm|i am|im) " + _N + _END, re.I)),
    ("self", re.compile(r"\b(?:it's|this is|it is) " + _N + r",? (?:here|speaking|calling)\b", re.I)),
    (  # a caller's or visitor's opening: "Hello, this is Omar from the garage", "Hi, it's Mei at reception"
        "self",
        re.compile(
            r"(?:^|[.!?]\s+)(?:hello|hi|hey|good (?:morning|afternoon|evening)|yes|yeah)[,.!]?\s+"
            r"(?:it's|this is|it is) " + _N + r",? (?:from|at|with|of)\b",
            re.I,
        ),
    ),
    ("self", re.compile(r"(?:^|[.!?]\s+)" + _N + r" here\b(?!\s+(?:is|are|was)\b)", re.I)),
    ("introduced", re.compile(r"\b(?:this is|that's|that is|here's|here is) " + _REL + _N + _END, re.I)),
    ("introduced", re.compile(r"\b(?:meet|introduce|introducing)(?: you to)? " + _REL + _N + _END, re.I)),
    ("introduced", re.compile(rf"(?:^|[.!?]\s+){_N} is (?:my|our) {RELATIONS}\b", re.I)),
    ("introduced", re.compile(rf"(?:^|[.!?]\s+){_N} is (?:the|our) new\b", re.I)),
    (
        "addressed",
        re.compile(
            r"\b(?:hi|hello|hey|thanks|thank you|bye|goodbye|good morning|good night|good evening|good afternoon|"
            r"morning|evening|welcome|welcome back|cheers|sorry|excuse me|congratulations|congrats|"
            r"(?:nice|pleased|good|great|lovely) to (?:meet|see) you(?: again| too)?|"
            r"see you(?: later| tomorrow| soon)?|"
            r"take care|come in|night|yes|no|okay|ok|sure|right|well done),? " + _N + _END,
            re.I,
        ),
    ),
    # An answer's opening word, then the name set off by commas: "Of course, Ania, still no news.",
    # "Absolutely, Tom, I'll do it." (a name ending the sentence is the pattern below's). A clause word after
    # the name is not enough here ("Perfect, Paris is lovely." names nobody), nor a list ("Well, Lagos, Accra").
    (
        "addressed",
        re.compile(
            r"(?:^|[.!?]\s+)(?:of course|absolutely|certainly|definitely|no problem|no worries|alright|all right|"
            r"got it|sure thing|right away|will do|perfect|great|lovely|fine|yeah|well),?\s+"
            + _N
            + r"\s*,(?!\s*[\w'-]+\s*(?:,|\band\b|\bor\b))",
            re.I,
        ),
    ),
    # "..., Omar?" ending the line or a sentence of it ("Of course, Anya. Still no news.")
    ("addressed", re.compile(r",\s*" + _N + r"\s*(?:[.!?]+(?=\s|$)|$)", re.I)),
    ("addressed", re.compile(r"\b(?:you|your)\b[^,.!?]*,\s*" + _N + r"\s*,", re.I)),  # "could you, Ana, ..."
    (
        "mentioned",
        re.compile(
            r"\b(?:tell|ask|told|asked|call|called|text|texted|phone|phoned|remind|reminded|visit|visited|visiting|"
            r"with|for|to|from|about|than|saw|met|miss|missed|invite|invited|gave|give|bring|brought|pick up|"
            r"picked up|drive|drove|and|or|poor|dear|uncle|aunt|auntie|cousin|grandma|grandpa|brother|sister|"
            r"friend|son|daughter|wife|husband|mr|mrs|ms|dr|doctor|where's|where is|is|was|wait for|waiting for) "
            + _N
            + r"\b(?!,)",
            re.I,
        ),
    ),
    ("mentioned", re.compile(_N + r"'s\b(?!\s+(?:here|speaking|calling))", re.I)),
    (
        "mentioned",
        re.compile(
            _N + r" (?:called|said|says|phoned|texted|wrote|wants|wanted|will|would|is coming|isn't|was|has|had|"
            r"can't|won't|left|went|lives|lived|works|worked|does|didn't|doesn't|should|might|and i|and me|"
            r"is (?:still |not )?\w+ing)\b",  # "Jonas is taking his time": said of him, to nobody
            re.I,
        ),
    ),
]
_VOCATIVE = re.compile(  # a sentence that opens with a name said to someone: "Priya, we need...", "gina can you..."
    r"(?:^|(?<=[.!?;])\s+)(?:(?:hey|hi|oh|so|okay|ok|well|and|look|listen|sorry),?\s+)?"
    + _N
    + r"(?:\s*!|\s*,\s*(?=\S)|\s+(?=(?:you|your|can you|could you|would you|will you|do you|did you|are you|have you|"
    r"we need|we have|we're|please|come|let's|lunch|dinner|the)\b))",
    re.I,
)
# A sentence that opens with a name is said to someone when the line asks, tells or exclaims.
_TO_SOMEONE = re.compile(r"\b(?:you|your|yourself|we need|let's|please|can|could|would|will)\b|[?!]", re.I)
# ... or when what follows the name's comma is a clause of its own ("Ana, order more tubes.", "Ben, the
# boxes go upstairs."), not an apposition that answers "who?" ("Tomasz, from accounts.", "Ana, the new
# nurse.") or a list of names ("Ana, Ben and Carl are here."): at least three words, the first no
# preposition, conjunction or capitalised name, and a phrase opening with a determiner has a verb.
_OPENING = re.compile(r"(?:^|(?<=[.!?;])\s+)" + _N + r",\s+(?P<rest>[^.!?;]+)")
_NOT_A_CLAUSE = re.compile(r"^(?:from|of|at|in|on|with|for|by|and|or|but|nor|plus|who|which|whose|too)\b", re.I)
_NOUN_PHRASE = re.compile(r"^(?:the|a|an|our|my|your|his|her|their)\b", re.I)  # a clause when a verb follows
_VERB = re.compile(
    r"\b(?:is|are|was|were|be|has|have|had|will|can|could|should|must|need|needs|goes|go|went|comes|came|"
    r"stays|leaves|left|arrives|arrived|starts|closes|opens)\b|'s\b|'re\b",
    re.I,
)
_DESCRIPTION = re.compile(  # what a name said with "I'm X" / "this is X" goes on to say about the person
    r"^\s*,?\s*(?:(?:and )?(?:he|she|they|i)(?:'s|'m| is| are| am)\s+(?P<is>[^.!?;,]+)|"
    r"(?:and )?(?:he|she|they|i) (?P<verb>[a-z]+s?)\s+(?P<rest>[^.!?;,]+)|"
    r"(?P<np>(?:the|a|an|our|your|my) [^.!?;,]+))",
    re.I,
)
_TITLE = re.compile(r"\b(?:dr|mr|mrs|ms|prof)\.?\s+(?=[A-Z])", re.I)  # "Dr. Okafor": the name is Okafor
_POSSESSIVE = re.compile(r"\b(?:my|our)\b", re.I)
_MY_RELATION = re.compile(rf"^(?:my|our) ({RELATIONS})$", re.I)
_CONTRACTIONS = ("'ll", "'re", "'ve", "'d", "'m", "n't")  # "you'll", "they're": never a name
RANK = {"self": 0, "introduced": 1, "addressed": 2, "mentioned": 3}  # which reading wins on one line


@dataclass(frozen=True)
class Mention:
    """A name said on a line, its role, and what the line says about that person (a predicate with
    SPEAKER standing for the speaker's label, e.g. "is the sister of {speaker}"; "" when nothing)."""

    name: str
    role: str
    about: str = ""


def clean_name(word: str, cased: bool) -> str | None:
    """The word as a stored name, or None when it is no name (a common word; lower case in a cased line)."""
    word = word.strip("'-")
    if word.lower().endswith("'s"):
        word = word[:-2]
    if len(word) < 2 or word.lower() in NOT_NAMES or word.lower().endswith(("ing", *_CONTRACTIONS)):
        return None
    if is_common_word(word):  # "Perfect, thank you." greets nobody called Perfect (common_words)
        return None
    if cased and not word[0].isupper():
        return None
    return word[0].upper() + word[1:].lower() if word.islower() or word.isupper() else word


def is_cased(text: str) -> bool:
    """Whether the recogniser wrote case (Whisper does, pocketsphinx does not): then names are capitalised."""
    return any(c.isupper() for c in re.sub(r"\bI\b", "", text))


def _about(text: str, end: int, role: str) -> str:
    """The description that follows a self-introduction or an introduction, as a predicate."""
    found = _DESCRIPTION.match(text[end:])
    if found is None:
        return ""
    if found.group("is"):
        predicate = "is " + found.group("is").strip()
    elif found.group("verb"):
        verb = found.group("verb").lower()
        if verb in ("is", "was", "can", "will", "would", "could", "should", "do", "did", "think", "guess"):
            return ""
        predicate = f"{verb} {found.group('rest').strip()}"
        if role == "self" and not verb.endswith("s"):
            predicate = f"{verb}s {found.group('rest').strip()}"  # "I work at ..." -> "works at ..."
    else:
        phrase = found.group("np").strip()
        relation = _MY_RELATION.match(phrase)
        if relation and role != "self" and not relation.group(1).lower().startswith("new "):
            return f"is the {relation.group(1).lower()} of {SPEAKER}"
        predicate = (
            "is " + _POSSESSIVE.sub("the", phrase)
            if role != "self"
            else "is " + re.sub(r"\bmy\b", "their", phrase, flags=re.I)
        )
    return predicate if len(predicate.split()) >= 2 else ""


def _relation_before(text: str, start: int) -> str:
    """ "my sister" just before an introduced name: the person is the speaker's sister."""
    found = re.search(rf"\b(?:my|our) ({RELATIONS}),? $", text[:start], re.I)
    return f"is the {found.group(1).lower()} of {SPEAKER}" if found else ""


def _opens_a_clause(rest: str, cased: bool) -> bool:
    """What follows "Name," is a clause said to that person (see _OPENING)."""
    words = rest.split()
    if len(words) < 3 or _NOT_A_CLAUSE.match(rest) or (_NOUN_PHRASE.match(rest) and not _VERB.search(rest)):
        return False
    return not (cased and words[0][0].isupper() and words[0] != "I" and not is_common_word(words[0]))


def find_mentions(text: str, cased: bool | None = None) -> list[Mention]:
    """Each person name the line says, once, in its strongest role (self, introduced, addressed,
    mentioned, in that order); names said without a cue word are not returned (the model reads those).

    `cased`: whether the recogniser writes case, known from the other lines of the stream (None: judge
    by this line alone). Case is the recogniser's habit, not the line's: a cased recogniser's line in
    lower case is a fragment cut mid-sentence ("course, and you'll ..."), whose first word is no name."""
    text = _TITLE.sub("", text)
    cased = is_cased(text) if cased is None else cased
    found: dict[str, tuple[int, Mention]] = {}

    def add(name: str | None, role: str, about: str = "") -> None:
        if name is None:
            return
        old = found.get(name)
        stronger = old is None or RANK[role] < RANK[old[1].role]
        if stronger or (RANK[role] == RANK[old[1].role] and about and not old[1].about):
            found[name] = (old[0] if old else len(found), Mention(name, role, about))

    for role, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            name = clean_name(m.group(1), cased)
            about = ""
            if role == "self":
                about = _about(text, m.end(1), role)
            elif role == "introduced":
                if text[m.end(1) :].lower().startswith((" is my", " is our")):  # "Ben is my brother"
                    relation = re.search(RELATIONS + r"\b", m.group(0)[m.end(1) - m.start(0) :], re.I)
                    about = f"is the {relation.group(0).lower()} of {SPEAKER}" if relation else ""
                else:
                    about = _about(text, m.end(1), role) or _relation_before(text, m.start(1))
            add(name, role, about)
    if _TO_SOMEONE.search(text):  # "Tomasz, from accounts." answers "who?": no one is spoken to
        for m in _VOCATIVE.finditer(text):
            add(clean_name(m.group(1), cased), "addressed")
    for m in _OPENING.finditer(text):
        if _opens_a_clause(m.group("rest"), cased):
            add(clean_name(m.group(1), cased), "addressed")
    return [mention for _, mention in sorted(found.values(), key=lambda item: item[0])]
