"""English irregular verb forms, each to its plain form, for the extractive reasoner's light stemmer.

Why: "What did Lucia bring from her village?" must meet "I brought you a jar of fig jam from our village.",
and suffix stripping cannot turn "brought" into "bring". Common everyday verbs only, past tense and past
participle; a form that is also another word ("left" as a direction, "saw" as a tool) is mapped on both
sides of a comparison alike, so it still meets itself. Kept here rather than a morphology library: the
reasoner compares short lines of everyday speech.
"""

from __future__ import annotations

_FORMS = """
see saw seen  bring brought  buy bought  take took taken  give gave given  go went gone  come came
make made  tell told  say said  find found  keep kept  leave left  lose lost  meet met  pay paid
sell sold  send sent  spend spent  teach taught  think thought  wear wore worn  write wrote written
drive drove driven  eat ate eaten  drink drank drunk  hold held  know knew known  sit sat  stand stood
speak spoke spoken  break broke broken  choose chose chosen  forget forgot forgotten  get got gotten
begin began begun  grow grew grown  fly flew flown  hear heard  feel felt  sleep slept  swim swam
ride rode ridden  run ran  win won  hang hung  lend lent  build built  catch caught  fight fought
bite bit  hide hid hidden  fall fell fallen  steal stole stolen  throw threw thrown
"""

IRREGULAR: dict[str, str] = {}
for _group in _FORMS.replace("\n", "  ").split("  "):
    if not _group.strip():
        continue
    _plain, *_inflected = _group.split()
    IRREGULAR.update(dict.fromkeys(_inflected, _plain))


def base_form(word: str) -> str:
    """A verb form's stem for comparing two verbs (makes / made / make -> "mak", brought -> "bring", carried ->
    "carry"): irregular forms looked up, then a regular ending and a final "e" dropped, the same on both sides."""
    word = word.lower()
    word = IRREGULAR.get(word, word)
    if len(word) > 4 and word.endswith(("ied", "ies")):  # carried, carries -> carry
        return word[:-3] + "y"
    for ending in ("ing", "ed", "es", "s"):
        if len(word) > len(ending) + 2 and word.endswith(ending) and not word.endswith(("ss", "us")):
            word = word[: -len(ending)]
            break
    return word.removesuffix("e")
