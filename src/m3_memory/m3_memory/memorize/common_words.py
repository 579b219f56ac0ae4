"""English words that are never a name: what a misheard transcript must not turn into one.

Speech recognition on an unseen voice writes a wrong word where a name or a phrase was ("Perfect,
thank you." read as a greeting to "Perfect"; "come and give me a minute" heard as "... im Minute",
read as "I'm Minute"). The cue words then place that word as a name, and its one vote names a
person. A hand-written list of such words can never be complete, so the system dictionary decides:
a word the dictionary lists in lower case and never capitalised is a common word, never a name.
Names that are also words ("Rose", "Will", "Grace", "Summer", "June") are listed capitalised too and
stay names; a rare given name that is only a word ("River", "Sky") is lost - the price of the rule.
Measured on issue 20's dev episodes (README of m3_memory, Names).

The dictionary is Debian's `wamerican` (/usr/share/dict/american-english, public domain SCOWL),
installed by bootstrap.sh; missing, the memory node fails to configure with a message naming it.
"""

from __future__ import annotations

import functools
from pathlib import Path

DICTIONARY = Path("/usr/share/dict/american-english")
PACKAGE = "wamerican"


class DictionaryMissing(FileNotFoundError):
    """The word list is not installed; the message names the package."""


@functools.cache
def _listed(path: Path) -> frozenset[str]:
    """Every word of `path` (one word per line), read once."""
    try:
        return frozenset(path.read_text(encoding="utf-8", errors="replace").split())
    except FileNotFoundError:
        raise DictionaryMissing(
            f"the English word list {path} is missing: install the Debian package {PACKAGE} "
            f"(apt-get install {PACKAGE}; bash bootstrap.sh setup does)"
        ) from None


@functools.cache
def lower_case_words(path: Path = DICTIONARY) -> frozenset[str]:
    """Words `path` lists in lower case."""
    return frozenset(w for w in _listed(path) if w.islower() and w.isalpha())


@functools.cache
def common_words(path: Path = DICTIONARY) -> frozenset[str]:
    """Lower-case words of `path` whose capitalised form is not listed."""
    listed = _listed(path)
    return frozenset(w for w in lower_case_words(path) if w.capitalize() not in listed)


def is_common_word(word: str) -> bool:
    """Whether `word` (any case) is a common English word and never a name."""
    return word.lower() in common_words()


def is_english_word(word: str) -> bool:
    """Whether `word` (any case) is an English word at all, a name's other sense included ("Rose",
    "Tom", "He" as helium): a capitalised word that is not one can only be a name."""
    return word.lower() in lower_case_words()
