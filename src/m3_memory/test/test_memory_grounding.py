"""A fact the model writes about a clip it only heard must be made of what was said (grounding.py);
checked through the memorizer against a scripted server, with a vision clip left unchecked."""

from __future__ import annotations

import json

from m3mem_evidence import S, clip, face, match, voice
from test_memory_openai_memorizer import jpeg, server_factory  # noqa: F401  (a fixture)

from m3_memory.memorize.grounding import copied, grounded
from m3_memory.memorize.openai_compatible import OpenAIMemorizer
from m3_memory.memory import Memory

SAID = ["I usually drink hot chocolate before bed.", "My sister Nadia moved the bike to the shed."]


def test_facts_made_of_what_was_said_are_kept():
    assert grounded("<voice_1> usually drinks hot chocolate before bed.", SAID)
    assert grounded("Nadia moves the bike to the shed.", SAID)  # inflections share the first letters
    assert grounded("<face_2> is the sister of <voice_1>.", SAID)  # labels are not words
    assert grounded("<voice_1> is here.", SAID)  # no longer word to judge
    assert grounded("He moved the bike to the shed.", SAID)  # an English word opens it ("He": helium)
    assert grounded("Dr. <voice_1> drinks hot chocolate.", SAID)  # an abbreviation, not a name


def test_copied_and_invented_facts_are_dropped():
    assert not grounded("<face_2> agrees to take the laundry out.", SAID)  # a prompt example's words
    assert not grounded("<face_1> is Tom.", SAID)  # a name nobody said
    assert not grounded("Nadia is the listener of the conversation.", SAID)
    assert not grounded("Elena moved the bike to the shed.", SAID)  # an opening name nobody said
    assert grounded("Nadia moved the bike to the shed.", SAID)  # the same, said


def test_a_fact_that_only_repeats_a_line_is_a_copy():
    assert copied("i usually drink HOT chocolate, before bed", SAID)
    assert copied("My sister Nadia moved the bike.", SAID)  # a stretch of the line
    assert not copied("<voice_1> usually drinks hot chocolate before bed.", SAID)  # says whose it is
    assert not copied("Nadia moved the bike to the garage.", SAID)
    assert not copied("the shed", SAID)  # too short to tell


def test_the_memorizer_keeps_heard_facts_and_trusts_what_a_vision_model_saw(tmp_path, server_factory):  # noqa: F811
    from m3_memory.search.embedder import TextEmbedder

    reply = {
        "names": [],
        "semantic": [
            "<voice_1> drinks hot chocolate before bed.",
            "<face_1> agrees to take the laundry out.",
            "Elena drinks hot chocolate before bed.",  # a name for the speaker's "I": the speaker's fact
            "I usually drink hot chocolate before bed.",
        ],
        "episodic": ["<face_1> waters the ferns."],
    }
    server = server_factory([json.dumps(reply), json.dumps(reply)])
    heard = clip(
        0,
        faces=[face("face_1", 1.0)],
        voices=[voice("voice_1", 2, 4, SAID[0])],
        matches=[match("face_1", "voice_1", 4)],
    )
    mem = Memory.open(str(tmp_path / "m"), TextEmbedder(), memorizer=OpenAIMemorizer(server.url, "m", timeout_s=5))
    record = mem.ingest(heard)
    texts = [n.text for n in [*record.semantic, *record.episodic]]
    assert "<voice_1> drinks hot chocolate before bed." in texts
    assert not any("laundry" in t or "ferns" in t or "Elena" in t for t in texts)
    assert [t for t in texts if "usually" in t] == [f'<voice_1> says: "{SAID[0]}"']  # the line, once

    seen = clip(1, faces=[face("face_1", 31.0)], voices=[voice("voice_1", 32, 34, SAID[0])])
    seen.keyframes = [(31 * S, jpeg(64, 48))]
    vision = OpenAIMemorizer(server.url, "qwen-vl", keyframes=1)
    record = mem.ingest(seen, memorizer=vision)
    assert "<face_1> waters the ferns." in [n.text for n in record.episodic]  # seen, never said
    mem.close()


def test_the_memorizer_drops_a_fact_its_asker_only_asked(tmp_path, server_factory):  # noqa: F811
    from m3_memory.search.embedder import TextEmbedder

    asked, answer = "Are you still working nights at the bakery, Petra?", "Only on weekends now, nights are over."
    reply = {
        "names": [],
        "semantic": ["<voice_1> works nights at the bakery.", "<voice_2> works at the bakery on weekends."],
        "episodic": [],
    }
    server = server_factory([json.dumps(reply)])
    heard = clip(0, voices=[voice("voice_1", 2, 5, asked), voice("voice_2", 6, 9, answer)])
    mem = Memory.open(str(tmp_path / "m"), TextEmbedder(), memorizer=OpenAIMemorizer(server.url, "m", timeout_s=5))
    texts = [n.text for n in mem.ingest(heard).semantic]
    mem.close()
    assert "<voice_1> works nights at the bakery." not in texts  # a question, asserting nothing of its asker
    assert "<voice_2> works at the bakery on weekends." in texts  # the answer's fact
