"""`m3 bench identity`: who spoke, whose face, which name — over the scripted dev and test episodes.

For each episode under m3_agent/demo/episodes/<split>/ (see the README there: the test split is only
run to report, never to tune), the script is rendered (kept while unchanged), recorded and replayed
through perception and memory as `m3 bench replay` does, its questions are asked through the Instruct
action, and the memory is scored against truth.json (m3_agent.bench.identity_metrics says how memory ids
are matched to true people):
- der (collar 0.25 s, overlapped speech scored), voice_ids_per_speaker (split voices) and
  speakers_per_voice (merged voices);
- binding_accuracy: people seen and heard whose face and voice ended up in one memory person;
- names_right (fraction of people whose name is said), names_missing, names_wrong, names_invented;
- person_accuracy (Person Understanding questions) and accuracy (all questions).
The last stdout line is JSON: `dev` and `test` (der weighted by speech time, fractions over all people
or questions of the split, counts summed) and `per_episode`.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np

from m3_agent.bench.identity_metrics import MemoryIdentity
from m3_agent.llm.cli import add_llm_arguments, service_for

SPLITS = ("dev", "test")
PERSON = "Person Understanding"
SAYS = re.compile(r"^<(voice_\d+)> says:")  # a line of an unclear speaker has no id: unlabelled, so missed


def episodes_dir() -> Path:
    return Path(str(resources.files("m3_agent.demo").joinpath("episodes")))


def episode_scripts(split: str, pattern: str | None) -> list[tuple[str, Path]]:
    """(split, script) for the chosen split(s), restricted to ids matching the glob; none is an error."""
    chosen = SPLITS if split == "both" else (split,)
    found = [(s, p) for s in chosen for p in sorted((episodes_dir() / s).glob("*.yaml"))]
    if pattern:
        found = [(s, p) for s, p in found if fnmatch.fnmatch(p.stem, pattern) or fnmatch.fnmatch(p.name, pattern)]
    if not found:
        raise SystemExit(
            f"m3 bench identity: no episode script in {episodes_dir()}/{{{','.join(chosen)}}} matches {pattern or '*'}"
        )
    return found


def read_memory(memory_dir: Path) -> tuple[MemoryIdentity, dict[str, list[np.ndarray]], dict[str, int]]:
    """The memory's voice segments (episode seconds), persons and names (ids resolved through aliases),
    and each face id's stored embeddings and observation count."""
    from m3_memory.store.sqlite_store import MemoryStore, blob_to_vector

    store = MemoryStore(str(memory_dir), create=False, readonly=True)
    try:
        conn = store.conn()
        aliases = dict(conn.execute("SELECT old_id, new_id FROM aliases").fetchall())

        def resolve(entity_id: str) -> str:
            seen = set()
            while entity_id in aliases and entity_id not in seen:
                seen.add(entity_id)
                entity_id = aliases[entity_id]
            return entity_id

        clips = conn.execute("SELECT clip_index, start_ns, end_ns FROM clips").fetchall()
        if not clips:
            raise RuntimeError(f"{memory_dir}: the replay stored no clip")
        origin = min(start - index * (end - start) for index, start, end in clips)  # the stream's first stamp
        segments = []
        for text, start_ns, end_ns in conn.execute(
            "SELECT text, start_ns, end_ns FROM text_nodes WHERE kind='episodic'"
        ):
            if match := SAYS.match(text):
                segments.append(((start_ns - origin) / 1e9, (end_ns - origin) / 1e9, resolve(match.group(1))))
        rows = conn.execute("SELECT entity_id, kind, name, person_id, observation_count FROM entities").fetchall()
        person_of = {e: resolve(p) for e, kind, _, p, _ in rows if kind != "person" and p}
        names = {e: name for e, kind, name, _, _ in rows if kind == "person"}
        counts = {e: n for e, kind, _, _, n in rows if kind == "face"}
        face_vectors: dict[str, list[np.ndarray]] = {}
        for entity_id, blob in conn.execute("SELECT entity_id, embedding FROM entity_embeddings"):
            if entity_id.startswith("face_"):
                face_vectors.setdefault(resolve(entity_id), []).append(blob_to_vector(blob))
    finally:
        store.close()
    return MemoryIdentity(sorted(segments), person_of, names), face_vectors, counts


def photo_embeddings(script: dict, params: dict) -> dict[str, np.ndarray]:
    """Each drawn person's face embedding from their photo as the episode shows it (large, centred),
    by the face encoder the replay used; a photo without a detectable face is an error."""
    from m3_agent.demo.photos import crop_photo, load_photo, scale_to_height
    from m3_perception.assembly import build_face_encoder

    drawn = {who: spec for who, spec in script["people"].items() if spec.get("photo")}
    if not drawn:
        return {}
    encoder = build_face_encoder(params)
    width, height = int(script["width"]), int(script["height"])
    out = {}
    for who, spec in drawn.items():
        portrait = scale_to_height(crop_photo(load_photo(spec["photo"]), spec.get("crop")), int(height * 0.62))
        frame = np.full((height, width, 3), 160, np.uint8)
        h, w = portrait.shape[:2]
        x0, y0 = (width - w) // 2, int(height * 0.78) - h
        frame[y0 : y0 + h, x0 : x0 + w] = portrait
        detections = encoder.detect(frame)
        if not detections:
            raise RuntimeError(f"no face found in {who}'s photograph {spec['photo']} (crop {spec.get('crop')})")
        best = max(detections, key=lambda d: d.w * d.h)
        out[who] = np.asarray(encoder.embed(frame, best), np.float32)
    return out


def memory_fingerprint(script_stamp: Path, params_file: str, overrides: dict) -> str:
    """What a kept memory was built from: the rendered script, the parameters, the LLM settings and
    the code of the runtime, perception, memory and the replay (a changed line there replays anew)."""
    import m3_agent.recording
    import m3_memory
    import m3_perception
    import m3_runtime

    digest = hashlib.sha256(script_stamp.read_bytes() + Path(params_file).read_bytes())
    digest.update(json.dumps(overrides, sort_keys=True, default=str).encode())
    agent = Path(__file__).resolve().parents[1]
    sources = [agent / "replay.py", agent / "replay_report.py", agent / "replay_state.py"]
    for package in (m3_runtime, m3_perception, m3_memory, m3_agent.recording):
        sources += sorted(Path(package.__file__).resolve().parent.rglob("*.py"))
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()


def run_episode(split: str, script: Path, root: Path, params_file: str, llm) -> dict:
    """Render (kept while the script is unchanged), record and replay (kept while script, parameters and
    LLM mode are unchanged), ask, and score one episode."""
    import yaml

    from m3_agent.bench.identity_metrics import identity_figures, match_faces
    from m3_agent.bench.replay import ask_questions, record_and_replay, render_episode
    from m3_agent.evaluation import report
    from m3_perception.perception_node import PARAMETERS as PERCEPTION_PARAMETERS
    from m3_runtime.parameter_checks import node_parameters

    spec = yaml.safe_load(script.read_text())
    out = root / split / spec["episode_id"]
    out.mkdir(parents=True, exist_ok=True)
    print(f"== {split}/{spec['episode_id']}", file=sys.stderr, flush=True)
    episode = render_episode(out, script, root / ".voice_cache", reuse=True)
    overrides = llm.merged()
    fingerprint = memory_fingerprint(out / "script.sha256", params_file, overrides)
    stamp = out / "memory.sha256"
    memory_dir = out / "episodes" / spec["episode_id"] / "memory"
    if episode["fresh"] or not stamp.exists() or stamp.read_text() != fingerprint or not memory_dir.exists():
        stamp.unlink(missing_ok=True)
        for stale in (out / "bag", out / "episodes"):
            shutil.rmtree(stale, ignore_errors=True)
        replayed = record_and_replay(out, episode, params_file, overrides)
        stamp.write_text(fingerprint)
    else:
        print("   (memory kept from an earlier run: same script, parameters and LLM)", file=sys.stderr)
        replayed = None
    records, _ = ask_questions(out, episode["questions"], params_file, overrides, episode["truth"])
    truth = json.loads(Path(episode["truth"]).read_text())
    params = node_parameters(params_file, "perception_node", PERCEPTION_PARAMETERS, overrides.get("perception_node"))
    memory, face_vectors, face_counts = read_memory(memory_dir)
    memory.face_of = match_faces(photo_embeddings(spec, params), face_vectors, face_counts)
    figures = identity_figures(truth, memory)
    person = [r for r in records if PERSON in r["type"]]
    summary = report.summarize(records)
    return {
        "split": split,
        "episode": spec["episode_id"],
        **figures,
        "questions": len(records),
        "accuracy": round(summary["accuracy"], 4),
        "person_questions": len(person),
        "person_accuracy": round(sum(bool(r["verdict"]) for r in person) / len(person), 4) if person else None,
        "answered_by_rules": summary["answered_by_rules"],  # a model did not know; the rules answered
        "replay_s": round(replayed["replay_s"], 2) if replayed else None,
    }


def aggregate(rows: list[dict]) -> dict:
    """One split's figures: der weighted by speech time; fractions over all people/questions; counts summed."""
    if not rows:
        return {}

    def weighted(key: str, weight: str) -> float | None:
        pairs = [(r[key], r[weight]) for r in rows if r[key] is not None and r[weight]]
        total = sum(w for _, w in pairs)
        return round(sum(v * w for v, w in pairs) / total, 4) if total else None

    return {
        "episodes": len(rows),
        "der": weighted("der", "speech_s"),
        "voice_ids_per_speaker": round(sum(r["voice_ids_per_speaker"] for r in rows) / len(rows), 3),
        "speakers_per_voice": round(sum(r["speakers_per_voice"] for r in rows) / len(rows), 3),
        "binding_accuracy": weighted("binding_accuracy", "bindable"),
        "names_right": weighted("names_right", "named_people"),
        "names_missing": sum(r["names_missing"] for r in rows),
        "names_wrong": sum(r["names_wrong"] for r in rows),
        "names_invented": sum(r["names_invented"] for r in rows),
        "person_accuracy": weighted("person_accuracy", "person_questions"),
        "accuracy": weighted("accuracy", "questions"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m3 bench identity", description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "both"), default="both", help="episodes to run (default both)")
    parser.add_argument("--episodes", metavar="GLOB", help="only episode ids (or file names) matching this glob")
    parser.add_argument(
        "--out",
        help="working directory kept between runs: rendered episodes, recordings and "
        "memories are reused while unchanged (default: a temporary one)",
    )
    parser.add_argument("--params-file", help="parameter YAML (default: the installed config/m3.yaml)")
    add_llm_arguments(parser)
    args = parser.parse_args(argv)
    from m3_agent.bringup import default_params_file

    scripts = episode_scripts(args.split, args.episodes)
    params_file = args.params_file or default_params_file()
    rows = []
    with service_for(args) as llm, tempfile.TemporaryDirectory(prefix="m3_bench_identity_") as scratch:
        root = Path(args.out or scratch)
        for split, script in scripts:
            rows.append(run_episode(split, script, root, params_file, llm))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "people"}), file=sys.stderr, flush=True)
        mode = llm.mode
    figures = {split: aggregate([r for r in rows if r["split"] == split]) for split in SPLITS}
    print(json.dumps({"llm": mode, **figures, "per_episode": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
