"""Light English stemming, one for every reader of words in the control loop (the rules reasoner, the answer
checks), so that "bikes" in a question meets "bike" in a memory wherever they are compared."""

from __future__ import annotations

from m3_control.irregular_verbs import IRREGULAR


def stem(word: str) -> str:
    """Light stemming so that takes/taking/take, pictures/picture, moved/move, saw/seen/see, brought/bring meet
    ("did you see the cat?" meets "A cat is seen.")."""
    word = word.lower().replace("'s", "").strip("'")
    word = IRREGULAR.get(word, word)
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss") and not word.endswith("us"):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":  # stopp(ed) -> stop
        word = word[:-1]
    return word
