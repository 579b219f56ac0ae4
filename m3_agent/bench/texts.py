"""Deterministic, varied memory sentences for `m3 bench memory` (and tests that need many texts).

Ten templates of what a robot's episodic memory says (objects put in places, likes, jobs, clothes,
requests between people) with about a dozen slots each, so that most sentences differ from their
nearest neighbour in more than one slot: MiniLM gives such a set the spread of real memory text,
not the near-copies of one template that make an ANN benchmark measure ties. Text i is the same
for every n (one PCG64 stream per slot, read as a prefix).
"""

from __future__ import annotations

import numpy as np


def _words(text: str) -> tuple[str, ...]:
    return tuple(word.strip() for word in text.split(","))


SUBJECT_KINDS = _words("voice, face, person")
VERBS = _words(
    "put, left, hid, placed, dropped, found, moved, stored, picked up, cleaned, fixed, borrowed, "
    "returned, opened, closed, packed, unpacked, washed, charged, lost"
)
ADJECTIVES = _words(
    "red, blue, green, black, white, yellow, old, new, small, large, wooden, metal, plastic, leather, "
    "broken, heavy, empty, full, striped, shiny"
)
OBJECTS = _words(
    "keys, phone, wallet, glasses, folder, mug, laptop, charger, umbrella, scarf, passport, notebook, "
    "remote, book, bottle, bag, box, lamp, camera, headphones, jacket, hat, shoes, toolbox, hammer, "
    "screwdriver, plate, bowl, kettle, teapot, vase, plant, pillow, blanket, towel, soap, toothbrush, "
    "medicine, letter, parcel, ticket, map, guitar, ball, toy car, doll, puzzle, candle, battery, cable"
)
PLACES = _words(
    "drawer, shelf, kitchen table, sofa, garage, backpack, desk, fridge, hallway, bathroom, car, "
    "window sill, balcony, bedroom, closet, basement, attic, dining room, office, living room, cupboard, "
    "sink, bookcase, nightstand, laundry basket, garden shed, porch, coat rack, microwave, oven"
)
LIKES = _words(
    "green tea, black coffee, orange juice, jazz music, classical music, hiking, swimming, chess, "
    "football, painting, cooking pasta, spicy food, science fiction, old movies, gardening, cycling, "
    "photography, dancing, reading novels, board games, yoga, fishing, baking bread, video games, "
    "running, knitting, the piano, the violin, cats, dogs"
)
JOBS = _words(
    "teacher, nurse, engineer, cameraman, doctor, chef, pilot, astronaut, programmer, artist, lawyer, "
    "farmer, student, driver, musician, writer, scientist, mechanic, waiter, banker"
)
TIMES = _words(
    "in the morning, at noon, in the afternoon, in the evening, at night, before lunch, after dinner, "
    "on Monday, on Tuesday, on Wednesday, on Thursday, on Friday, on Saturday, on Sunday, yesterday, "
    "today, last week, this weekend"
)
FEELINGS = _words("happy, tired, busy, worried, excited, relaxed, annoyed, curious, hungry, sleepy")
CLOTHES = _words("jacket, sweater, shirt, dress, coat, hoodie, scarf, cap, t-shirt, uniform")
PRONOUNS = _words("he, she, they")
TEMPLATES = (
    "{a} {verb} the {adj} {obj} in the {place} {time}",
    "{a} says that {pron} likes {like} {time}",
    "{a} tells {b} that the {adj} {obj} is in the {place}",
    "{a} asks {b} where the {obj} is, and {b} answers that it is in the {place}",
    "{a} works as a {job} and looks {feel} {time}",
    "{a} is wearing a {adj} {cloth} and holding the {obj}",
    "{a} and {b} talk about {like} in the {place} {time}",
    "{a} hands the {adj} {obj} to {b} near the {place}",
    "{a} reminds {b} to bring the {obj} {time}",
    "{a} says {pron} feels {feel} because the {obj} is missing from the {place}",
)
SLOTS = {
    "verb": VERBS, "adj": ADJECTIVES, "obj": OBJECTS, "place": PLACES, "time": TIMES,
    "like": LIKES, "job": JOBS, "feel": FEELINGS, "cloth": CLOTHES, "pron": PRONOUNS,
}  # fmt: skip


def sentences(n: int, people: int = 40) -> list[str]:
    """n memory sentences (no final full stop) about entities 1..people; text i does not depend on n."""
    if n <= 0:
        return []

    def draw(stream: int, high: int) -> np.ndarray:
        return np.random.default_rng([20260, stream]).integers(high, size=n)

    template = draw(0, len(TEMPLATES))
    a, b = draw(1, people), draw(2, people - 1)
    b = b + (b >= a)  # a different entity than a
    kind_a, kind_b = draw(3, len(SUBJECT_KINDS)), draw(4, len(SUBJECT_KINDS))
    slots = {name: draw(5 + k, len(values)) for k, (name, values) in enumerate(SLOTS.items())}
    out = []
    for i in range(n):
        fill = {name: values[slots[name][i]] for name, values in SLOTS.items()}
        fill["a"] = f"<{SUBJECT_KINDS[kind_a[i]]}_{a[i] + 1}>"
        fill["b"] = f"<{SUBJECT_KINDS[kind_b[i]]}_{b[i] + 1}>"
        out.append(TEMPLATES[template[i]].format(**fill))
    return out
