"""English verb forms for facts rewritten about a third person ("I walk my dog" -> "<voice_2> walks
their dog"): the regular -s/-es/-ies, with the pasts and adverbs that must not take one. Kept small and
here rather than a morphology library: the facts are short clauses of everyday speech."""

from __future__ import annotations

PRESENT_VERBS = frozenset(
    """like love hate prefer enjoy want need have live work drink eat own play keep go do read watch use drive take
    wear cook study teach know remember usually""".split()
)
ADVERBS = frozenset(
    "usually always often never really also sometimes normally still just only even already rarely mostly".split()
)
# Words after "I" that are no present-tense verb to put in the third person: pasts that do not end in
# -ed, and verbs whose present and past are one word ("I put the keys..." stays "put").
NOT_PRESENT = frozenset(
    """came went got had made took saw said told left found thought bought brought ate drank drove rode wrote ran
    sat met lost won gave knew felt kept slept paid sold spent heard put read cut let set hit quit shut began
    became forgot broke chose flew grew hung held lent lay led meant sent shot spoke stood stole swam taught
    threw understood woke wore""".split()
)


def is_adverb(word: str) -> bool:
    """ "usually", "totally": an adverb before the verb ("I totally agree"), not the verb itself."""
    word = word.lower()
    return word in ADVERBS or (word.endswith("ly") and word not in ("apply", "reply", "rely", "fly", "supply"))


def third_person(verb: str) -> str:
    """ "walk" -> "walks" after a third-person subject (English's regular -s/-es/-ies); pasts and words
    already inflected stay as they are."""
    verb_l = verb.lower()
    if verb_l == "have":
        return "has"
    regular = verb_l not in NOT_PRESENT and len(verb_l) > 1 and verb_l.isalpha()
    inflected = verb_l.endswith(("ed", "ing")) or (verb_l.endswith("s") and not verb_l.endswith("ss"))
    if verb_l not in PRESENT_VERBS and not (regular and not inflected):
        return verb_l
    if verb_l.endswith(("sh", "ch", "x", "z", "o", "ss")):
        return verb_l + "es"
    if verb_l.endswith("y") and verb_l[-2] not in "aeiou":
        return verb_l[:-1] + "ies"
    return verb_l + "s"
