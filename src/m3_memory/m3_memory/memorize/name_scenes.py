"""Short scenes for measuring who gets which name: settings, names and phrasings none of the demo
episodes use (office, clinic, shop, family, visitors; first names from many languages), each role
(oneself, introducing, addressing, someone absent), a name called to someone off-camera, a person
only heard, and lines whose speaker perception could not tell.

Speaker k is voice_k; face_k is seen throughout when k is in `faces` (face_k = voice_k: one person);
speaker 0 is a line without a voice id. `names` is who really is who, as the scene's author knows it
(a name said only on an uncertain line is still the person's: its policy's cost counts as missing).
Split before any tuning: DEV for developing the name roles, TEST run only to report (README).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from m3_memory.graph.records import ClipEvidence, FaceEvidence, MatchEvidence, VoiceEvidence

S = 1_000_000_000


@dataclass(frozen=True)
class Scene:
    """One clip: who is seen, who says what, and the true names."""

    title: str
    faces: tuple[int, ...]
    lines: tuple[tuple[int, str], ...]
    names: dict[int, str] = field(default_factory=dict)


def _scene(title: str, faces: tuple[int, ...], lines: list[tuple[int, str]], **names: str) -> Scene:
    return Scene(title, faces, tuple(lines), {int(k.lstrip("p")): v for k, v in names.items()})


# fmt: off
DEV = [
    _scene("clinic: a new nurse", (1, 2), [
        (1, "Good morning, I'm Ana, the new nurse."),
        (2, "Welcome, Ana. I'm Dr. Okafor, I run this ward."),
    ], p1="Ana", p2="Okafor"),
    _scene("bike shop: an introduction", (1, 2, 3), [
        (1, "This is Ben, he fixes the bikes."),
        (2, "Hi, nice to meet you all."),
        (3, "Nice to meet you, Ben."),
    ], p2="Ben"),
    _scene("office: a request", (1, 2), [
        (1, "Priya, we need the slides by noon."),
        (2, "Sure, I'll send them after lunch."),
    ], p2="Priya"),
    _scene("office: people on the phone", (1,), [
        (1, "Tell Yusuf I called about the invoice."),
        (1, "Mariam's report is on my desk."),
    ]),
    _scene("family: dinner call", (1, 2, 3), [
        (1, "Kwame, dinner is ready!"),
        (2, "Coming!"),
        (3, "Everyone calls me Nana, by the way."),
    ], p2="Kwame", p3="Nana"),
    _scene("visitors: a voice at the door", (1,), [
        (1, "Who's there?"),
        (2, "Olga here, I brought your parcel."),
        (1, "Thanks, Olga, leave it by the door."),
    ], p2="Olga"),
    _scene("office: an unclear self-introduction", (1, 2), [
        (0, "I'm Tomasz."),
        (1, "Sorry, I missed that."),
        (2, "Tomasz, from accounts."),
    ], p2="Tomasz"),
    _scene("shop: lower case, no punctuation", (1, 2), [
        (1, "hi i'm mei i just started at the till"),
        (2, "welcome mei i'm jorge the manager"),
    ], p1="Mei", p2="Jorge"),
    _scene("family: a brother introduced", (1, 2, 3), [
        (1, "Let me introduce my brother Hamid."),
        (2, "Hello everyone."),
        (3, "Hi Hamid, I'm Sofia."),
    ], p2="Hamid", p3="Sofia"),
    _scene("office: a name at the end", (1, 2), [
        (1, "Can you check the printer, Lars?"),
        (2, "Already on it."),
    ], p2="Lars"),
    _scene("clinic: asking for someone absent", (1, 2), [
        (1, "Is Mr. Chen here yet?"),
        (2, "No, I'm Arjun, his son. He is parking the car."),
    ], p2="Arjun"),
    _scene("visitors: a couple", (1, 2, 3), [
        (1, "Hello, I'm Ingrid and this is my husband Kofi."),
        (2, "Good to meet you."),
        (3, "Welcome, Ingrid and Kofi, come in."),
    ], p1="Ingrid", p2="Kofi"),
    _scene("shop: someone absent, then a name", (1, 2), [
        (1, "Did Rahul order the flour?"),
        (2, "Yes, Rahul called this morning. I'm Leila, by the way."),
        (1, "Thanks, Leila."),
    ], p2="Leila"),
    _scene("family: lower case request", (1, 2), [
        (1, "yuki can you feed the cat"),
        (2, "okay mum"),
    ], p2="Yuki"),
    _scene("office: an unclear line calls a name", (1, 2, 3), [
        (1, "Morning everyone."),
        (0, "Diego, your badge is ready."),
        (2, "Great, thanks."),
    ], p2="Diego"),
    _scene("clinic: the doctor introduced to a patient", (1, 2, 3), [
        (1, "Mrs. Novak, this is Dr. Adeyemi, she will do your scan."),
        (2, "Nice to meet you, doctor."),
        (3, "Hello, Mrs. Novak, please sit down."),
    ], p2="Novak", p3="Adeyemi"),
    _scene("family: a name shouted off-camera", (1, 2), [
        (1, "Zeynep! Your bus leaves in five minutes!"),
        (2, "She's still asleep, I think."),
    ]),
    _scene("shop: a regular", (1, 2), [
        (1, "The usual, Mr. Haddad?"),
        (2, "Yes please, and my name's Karim, no need for mister."),
    ], p2="Karim"),
]

TEST = [
    _scene("bakery: an interview", (1, 2), [
        (1, "Hi, my name is Aiko, I'm here for the job interview."),
        (2, "Welcome, Aiko. I'm Pedro, I own the bakery."),
    ], p1="Aiko", p2="Pedro"),
    _scene("family: a friend brought home", (1, 2, 3), [
        (1, "Grandma, this is Noor, my best friend from school."),
        (3, "Hello, Noor, come in."),
        (2, "Thank you!"),
    ], p2="Noor"),
    _scene("office: someone late", (1, 2), [
        (1, "Can someone call Fatima? She's late."),
        (2, "I texted Fatima already."),
    ]),
    _scene("clinic: a patient only heard", (1,), [
        (1, "Next patient, please."),
        (2, "That's me, I'm Giorgos."),
        (1, "Come in, Giorgos."),
    ], p2="Giorgos"),
    _scene("shop: lower case", (1, 2), [
        (1, "excuse me are you open"),
        (2, "yes come in i'm rania what do you need"),
        (1, "thanks rania just some bread"),
    ], p2="Rania"),
    _scene("family: an unclear answer", (1, 2), [
        (1, "Who wants tea?"),
        (0, "I'm Bashir, I'd love some."),
        (2, "Me too, please."),
    ], p2="Bashir"),
    _scene("office: a new designer", (1, 2, 3), [
        (1, "Everyone, meet Chiara, our new designer."),
        (2, "Hi Chiara!"),
        (3, "Thanks, glad to be here."),
    ], p3="Chiara"),
    _scene("visitors: neighbours", (1, 2), [
        (1, "Hello, I'm Emeka from next door."),
        (2, "Oh hi Emeka, I'm Astrid."),
        (1, "Nice to meet you, Astrid."),
    ], p1="Emeka", p2="Astrid"),
    _scene("family: someone else's bike", (1, 2), [
        (1, "Lucia, is that Marco's bike in the hall?"),
        (2, "Yes, he left it there."),
    ], p2="Lucia"),
    _scene("clinic: a son introduced", (1, 2, 3), [
        (1, "Hello, I'm Siobhan, I'll be your nurse today."),
        (2, "Hi Siobhan, this is my son Tariq."),
        (3, "Hello."),
    ], p1="Siobhan", p3="Tariq"),
]
# fmt: on


def clip_of(scene: Scene, index: int = 0) -> tuple[ClipEvidence, dict[str, str]]:
    """The scene as one 30 s clip of perception evidence, and the identity id map a memorizer takes."""
    t0 = index * 30.0
    box = (0.0, 0.0, 80.0, 80.0)
    faces = [FaceEvidence(f"face_{k}", k, box, 0.9, int((t0 + t) * S)) for k in scene.faces for t in (1, 14, 27)]
    voices = []
    for i, (k, text) in enumerate(scene.lines):
        start, end = int((t0 + 2 + 4 * i) * S), int((t0 + 5 + 4 * i) * S)
        voices.append(VoiceEvidence(f"voice_{k}" if k else "", start, end, text, 0.9, [], i))
    speakers = {k for k, _ in scene.lines if k}
    stamp = int((t0 + 5) * S)
    matches = [MatchEvidence(f"face_{k}", f"voice_{k}", 0.9, 3, stamp, 2, 4) for k in scene.faces if k in speakers]
    ids = {f"face_{k}": f"face_{k}" for k in scene.faces} | {f"voice_{k}": f"voice_{k}" for k in speakers}
    return ClipEvidence(index, int(t0 * S), int((t0 + 30) * S), faces, voices, matches), ids


def person_names(names: list[tuple[str, str]]) -> dict[int, str]:
    """The name each person ends with after one vote per (label, name): the most voted (first on a tie)."""
    votes: dict[int, Counter] = {}
    for label, name in names:
        votes.setdefault(int(label.split("_")[1]), Counter())[name] += 1
    return {k: c.most_common(1)[0][0] for k, c in votes.items()}


def score(scene: Scene, learned: dict[int, str]) -> Counter:
    """right / wrong / missing / invented for one scene: invented is a name on a person who has none."""
    out: Counter = Counter()
    people = set(scene.faces) | {k for k, _ in scene.lines if k}
    for k in people:
        true, got = scene.names.get(k), learned.get(k)
        if true is None:
            out["invented"] += got is not None
        elif got is None:
            out["missing"] += 1
        else:
            out["right" if got.lower() == true.lower() else "wrong"] += 1
    out["named"] += sum(1 for k in people if k in scene.names)
    return out
