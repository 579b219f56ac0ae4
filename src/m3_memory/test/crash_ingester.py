"""Child process of test_crash_safety.py: ingests clips forever, printing 'stored N' after each commit."""

from __future__ import annotations

import sys

from m3mem_evidence import clip, face, match, voice

from m3_memory.memory import Memory


def main() -> None:
    memory = Memory.open(sys.argv[1])
    print("ready", flush=True)
    index = memory.next_clip_index
    while True:
        t = index * 30.0
        record = memory.ingest(
            clip(index, faces=[face(f"face_{index % 5 + 1}", t + 1), face("face_9", t + 2)],
                 voices=[voice(f"voice_{index % 3 + 1}", t + 3, t + 5, f"I put item number {index} in box {index % 7}"),
                         voice("voice_9", t + 6, t + 8, "I like green tea")],
                 matches=[match(f"face_{index % 5 + 1}", f"voice_{index % 3 + 1}", t + 5)])
        )  # fmt: skip
        print(f"stored {record.clip_index}", flush=True)
        index += 1


if __name__ == "__main__":
    main()
