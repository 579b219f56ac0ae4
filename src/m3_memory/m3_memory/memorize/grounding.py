"""Is a fact a model wrote about a clip it only heard grounded in what was said?

A small model copies its prompt's examples and invents: on the unseen episode the embedded 1.5B
stored "<face_2> agrees to take the laundry out." (its prompt's example; nobody spoke of laundry),
and on other clips "<face_1> is Tom" and "Ruth is the listener of the conversation". When the
model saw no image, every fact comes from speech, so a fact is kept only when at least half of its
longer words (five letters or more) were said (a word counts when a said word starts with the same
four letters: "drinks" for "drink", "moved" for "moves") and every capitalised word after its first
was said (names are what a small model invents). Entity labels are not words. Facts from a vision
model (images sent) are not checked: what it saw was never said.
"""

from __future__ import annotations

import re

from m3_memory.graph.tags import TAG_RE

WORD_RE = re.compile(r"[^\W\d_][\w'-]*")  # a word as said: letters first, then letters, ' or -
STEM = 4  # letters two words must share to count as one word
MIN_SHARE = 0.5  # share of a fact's longer words that must have been said


def stem(word: str) -> str:
    """The word as compared: lower case, without 's, its first STEM letters."""
    return word.lower().removesuffix("'s")[:STEM]


def grounded(text: str, transcripts: list[str]) -> bool:
    """Whether `text` is made of what was said (above); a text without longer words is kept."""
    said = {stem(w) for t in transcripts for w in WORD_RE.findall(t)}
    words = WORD_RE.findall(TAG_RE.sub(" ", text))
    if any(w[0].isupper() and stem(w) not in said for w in words[1:]):
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
