"""Is a fact a model wrote about a clip it only heard grounded in what was said?

A small model copies its prompt's examples and invents: on the unseen episode the embedded 1.5B
stored "<face_2> agrees to take the laundry out." (its prompt's example; nobody spoke of laundry),
and on other clips "<face_1> is Tom" and "Ruth is the listener of the conversation". When the
model saw no image, every fact comes from speech, so a fact is kept only when at least half of its
longer words (five letters or more) were said (a word counts when a said word starts with the same
four letters: "drinks" for "drink", "moved" for "moves") and every capitalised word after its first
was said (names are what a small model invents). The first word is held to that too when it is no
English word in lower case and not an abbreviation ("Elena teaches ..." on a clip where nobody said
Elena, measured on a dev episode; "Dr. <voice_4> ..." and "He ..." pass). Entity labels are not
words. Facts from a vision model (images sent) are not checked: what it saw was never said.
"""

from __future__ import annotations

import re

from m3_memory.graph.tags import TAG_RE
from m3_memory.memorize.common_words import is_english_word

WORD_RE = re.compile(r"[^\W\d_][\w'-]*")  # a word as said: letters first, then letters, ' or -
STEM = 4  # letters two words must share to count as one word
MIN_SHARE = 0.5  # share of a fact's longer words that must have been said


def stem(word: str) -> str:
    """The word as compared: lower case, without 's, its first STEM letters."""
    return word.lower().removesuffix("'s")[:STEM]


def _opens_with_name(text: str) -> bool:
    """Whether `text` opens with a word that can only be a name: no English word in lower case and
    not an abbreviation ("Dr.", "Ms.")."""
    first = WORD_RE.match(text)
    return first is not None and not is_english_word(first[0]) and text[first.end() :][:1] != "."


def grounded(text: str, transcripts: list[str]) -> bool:
    """Whether `text` is made of what was said (above); a text without longer words is kept."""
    said = {stem(w) for t in transcripts for w in WORD_RE.findall(t)}
    bare = TAG_RE.sub(" ", text).strip()
    words = WORD_RE.findall(bare)
    if any(w[0].isupper() and stem(w) not in said for w in words[0 if _opens_with_name(bare) else 1 :]):
        return False
    longer = [w for w in words if len(w) > STEM]
    return not longer or sum(stem(w) in said for w in longer) >= MIN_SHARE * len(longer)


def copied(text: str, transcripts: list[str], min_words: int = 3) -> bool:
    """Whether `text` only repeats a stretch of one line as said (case and punctuation aside): with
    the lines stored verbatim it adds nothing, and in the speaker's first person it no longer says
    whose fact it is (measured: "Please do not eat the strawberries, ..." as a fact, and the model
    answering "what should David never be served?" with it)."""
    words = [w.lower() for w in WORD_RE.findall(TAG_RE.sub(" ", text))]
    if len(words) < min_words or TAG_RE.search(text):
        return False
    stretch = f" {' '.join(words)} "
    return any(stretch in f" {' '.join(w.lower() for w in WORD_RE.findall(t))} " for t in transcripts)
