"""People in the memory graph: faces and voices observed per clip, match evidence, person merges, names.

A mixin of MemoryGraph (m3_memory.graph.memory_graph), which owns the state these methods read and change;
every change is also handed to the clip's StoreWriter so the back-end stores it with the clip.
"""

from __future__ import annotations

import logging
import re

import numpy as np

from m3_memory.errors import StoreError
from m3_memory.graph.backend import StoreWriter
from m3_memory.graph.name_spellings import spelling_groups
from m3_memory.graph.records import (
    KIND_FACE,
    KIND_PERSON,
    KIND_VOICE,
    ClipEvidence,
    EntityRecord,
    Sighting,
    VoiceEvidence,
)
from m3_memory.graph.tags import kind_of, seq_of
from m3_memory.store.ann_index import CosineIndex

log = logging.getLogger(__name__)


MIN_VOTE = 0.05  # a mention's least weight: a line heard with no confidence at all still counts a little


def heard_weight(voices: list[VoiceEvidence], name: str) -> float:
    """The weight of a vote for a name said in a clip: the recognition confidence [0..1] of the surest line
    of the clip that has the name as a word (of any line, if none has it as written).

    A name speech recognition was unsure of is the likeliest to be misheard ("Amolum" for Amara): two
    names voted once each are no longer a tie that the first heard wins (issue 20). Votes written before
    weights (whole counts) weigh as lines heard with full confidence."""
    said = re.compile(rf"\b{re.escape(name)}\b", re.I)
    lines = [v.confidence for v in voices if v.transcript.strip()]
    named = [v.confidence for v in voices if said.search(v.transcript)]
    return round(min(1.0, max(MIN_VOTE, max(named or lines or [1.0]))), 4)


def usable_embedding(values) -> np.ndarray | None:
    """A finite, non-zero embedding as float32, or None (such evidence keeps its observation only)."""
    if values is None or len(values) == 0:
        return None
    vector = np.asarray(values, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(vector)) or float(np.linalg.norm(vector)) < 1e-9:
        return None
    return vector


class PeopleMixin:
    """Entity observation, matching and merging; see the module docstring."""

    def _index_entity(self, entity_id: str) -> None:
        """Index an entity's centroid (label = its number) in the index of its kind and dimension."""
        samples = self.entity_samples.get(entity_id) or []
        if not samples:
            return
        kind = kind_of(entity_id)
        centroid = np.mean(np.stack(samples), axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
        key = f"{kind}:{centroid.shape[0]}"
        index = self.entity_index.get(key)
        if index is None:
            index = self.entity_index[key] = CosineIndex(centroid.shape[0], capacity=256)
        index.add([seq_of(entity_id)], centroid[None, :])

    def refresh_people(self) -> bool:
        """Take in the people other robots stored meanwhile (a fleet back-end shares them), so a face
        or voice first seen elsewhere matches here by the usual thresholds. False: nothing shared,
        or the storage is away (the people known here are kept)."""
        with self.ingest_lock:
            try:
                snap = self.backend.people()
            except StoreError:
                return False
            if snap is None:
                return False
            with self.lock:
                self.entities = {record.entity_id: record for record in snap.entities}
                self.aliases, self.evidence = snap.aliases, snap.evidence
                self.entity_samples, self.entity_index = snap.entity_samples, {}
                for entity_id in self.entity_samples:
                    self._index_entity(entity_id)
            return True

    def _create_entity(self, writer: StoreWriter, kind: str, clip_index: int) -> str:
        """A new face/voice entity and its own new person (persons merge later on evidence)."""
        seq = self.backend.entity_number(writer.next_id(kind))
        entity_id = f"{kind}_{seq}"
        person_seq = self.backend.entity_number(writer.next_id(KIND_PERSON))
        person_id = f"person_{person_seq}"
        for eid, eseq, ekind, person in ((person_id, person_seq, KIND_PERSON, ""), (entity_id, seq, kind, person_id)):
            record = EntityRecord(eid, eseq, ekind, person_id=person, first_clip=clip_index, last_clip=clip_index)
            writer.add_entity(record)
            self.entities[eid] = record
        return entity_id

    def _observe_entities(self, writer: StoreWriter, clip: ClipEvidence, mapped: dict[str, str]) -> None:
        """Counts, times, embedding samples and the best crop of every face/voice seen in the clip."""
        observations: dict[str, list] = {}
        for face in clip.faces:
            observations.setdefault(mapped[face.face_id], []).append(("face", face))
        for voice in clip.voices:
            if voice.voice_id:  # a line whose speaker is uncertain observes no voice
                observations.setdefault(mapped[voice.voice_id], []).append(("voice", voice))
        for entity_id, items in observations.items():
            record = self.entities[entity_id]
            stamps = [item.stamp_ns if kind == "face" else item.start_ns for kind, item in items]
            ends = [item.stamp_ns if kind == "face" else item.end_ns for kind, item in items]
            if record.observation_count == 0:
                record.first_ns, record.first_clip = min(stamps), clip.clip_index
            record.observation_count += len(items)
            record.last_ns, record.last_clip = max(ends), clip.clip_index
            sighting = Sighting(entity_id, clip.clip_index, min(stamps), max(ends), self.place_at(clip.path, max(ends)))
            self.sightings.setdefault(entity_id, []).append(sighting)
            writer.add_sighting(sighting)
            limit = self.config.max_face_embeddings if record.kind == KIND_FACE else self.config.max_voice_embeddings
            samples = self.entity_samples.setdefault(entity_id, [])
            new_samples = [usable_embedding(item.embedding) for _, item in items]
            new_samples = [v for v in new_samples if v is not None]
            dims = {s.shape[0] for s in samples}
            new_samples = [s for s in new_samples if not dims or s.shape[0] in dims]
            for vector in new_samples:
                vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
                if len(samples) < limit:
                    samples.append(vector)
                else:  # deterministic replacement (the reference samples at random): rotate slots
                    samples[record.observation_count % limit] = vector
            if new_samples:
                writer.set_samples(entity_id, samples)
                self._index_entity(entity_id)
            best = None
            for kind, item in items:
                if kind == "face" and item.crop_jpeg:
                    score = float(item.score) * (1.0 + float(item.quality))
                    if score > record.crop_score and (best is None or score > best[0]):
                        best = (score, item.crop_jpeg)
            if best is not None:
                record.crop_score = best[0]
                writer.set_crop(entity_id, best[0], best[1])
            writer.save_entity(record)
            person = self.entities[self.resolve(record.person_id)]
            if person.first_clip < 0 or person.observation_count == 0:
                person.first_clip, person.first_ns = record.first_clip, record.first_ns
            person.observation_count += len(items)
            person.last_clip, person.last_ns = clip.clip_index, max(person.last_ns, record.last_ns)
            writer.save_entity(person)

    def _record_match(self, writer: StoreWriter, id1: str, id2: str, confidence: float, count: int, clip):
        """Store match evidence; unite the two persons when it is strong and unambiguous.

        A voice unites with a face only when each is the other's strongest match (the reference keeps
        a voice's strongest face and breaks ties at random; here ties go to the lower id) and neither
        person already has a member of the other kind: evidence alone never collapses two humans
        who were both seen and heard into one person."""
        id1, id2 = self.resolve(id1), self.resolve(id2)
        if id1 not in self.entities or id2 not in self.entities or id1 == id2:
            return None
        a, b = sorted((id1, id2))
        old = self.evidence.get((a, b), (0.0, 0))
        confidence, count = max(confidence, old[0]), max(int(count), old[1])
        self.evidence[(a, b)] = (confidence, count)
        writer.put_match(a, b, confidence, count, clip.clip_index, clip.end_ns)
        if confidence < self.config.equivalence_min_confidence or count < self.config.equivalence_min_evidence:
            return None
        pa, pb = self.person_of(a), self.person_of(b)
        if pa is None or pb is None or pa == pb:
            return None
        kinds = {kind_of(a), kind_of(b)}
        if kinds == {KIND_FACE, KIND_VOICE}:
            face, voice = (a, b) if kind_of(a) == KIND_FACE else (b, a)
            if self._best_match(voice, KIND_FACE) != face or self._best_match(face, KIND_VOICE) != voice:
                return None
            face_person_kinds = {kind_of(m) for m in self.members_of(self.person_of(face))}
            voice_person_kinds = {kind_of(m) for m in self.members_of(self.person_of(voice))}
            if KIND_VOICE in face_person_kinds or KIND_FACE in voice_person_kinds:
                return None
        return self._merge_persons(writer, pa, pb, clip.clip_index)

    def alias_voices(self, merges: list[tuple[str, str]]) -> None:
        """Perception found two voice ids one speaker (ClipEvidence.voice_merges): where only one of them
        maps to a memory entity this run, the other maps there too, for the rest of the run (before the
        clip's ids are mapped, so its renamed utterances join that entity rather than founding one)."""
        with self.lock:
            for gone, into in merges:
                a, b = self.session_map.get(gone), self.session_map.get(into)
                if a and not b:
                    self.session_map[into] = a
                elif b and not a:
                    self.session_map[gone] = b

    def _merge_voices(self, writer: StoreWriter, clip: ClipEvidence) -> list[tuple[str, str]]:
        """Unite the persons of two voice ids perception merged (clip.voice_merges) when both map to
        memory entities of different persons; the older person survives, the other stays an alias.
        Refused (logged, counted in voice_merges_refused) when each person has a face: two humans were seen."""
        merged = []
        for gone, into in clip.voice_merges:
            a, b = self.session_map.get(gone), self.session_map.get(into)
            pa, pb = self.person_of(a) if a else None, self.person_of(b) if b else None
            if pa is None or pb is None or pa == pb:
                continue
            if all(KIND_FACE in {kind_of(m) for m in self.members_of(p)} for p in (pa, pb)):
                self.voice_merges_refused += 1
                log.warning(
                    "clip %d: voice merge %s -> %s refused: %s and %s each have a face (%d refused so far)",
                    clip.clip_index, gone, into, pa, pb, self.voice_merges_refused,
                )  # fmt: skip
                continue
            merged.append(self._merge_persons(writer, pa, pb, clip.clip_index))
        return merged

    def _best_match(self, entity_id: str, other_kind: str) -> str | None:
        """Strongest evidence partner of the other kind: most evidence, then confidence, then lowest id."""
        best = None
        for (a, b), (confidence, count) in self.evidence.items():
            if entity_id not in (a, b):
                continue
            other = b if a == entity_id else a
            if kind_of(other) != other_kind:
                continue
            key = (count, confidence, -seq_of(other))
            if best is None or key > best[0]:
                best = (key, other)
        return None if best is None else best[1]

    def _merge_persons(self, writer: StoreWriter, pa: str, pb: str, clip_index: int) -> tuple[str, str]:
        """The older person survives (ids never change once published); the other becomes an alias."""
        keep, gone = sorted((pa, pb), key=seq_of)
        survivor, loser = self.entities[keep], self.entities.pop(gone)
        moved_aliases = [old for old, new in self.aliases.items() if new == gone]
        for old in moved_aliases:
            self.aliases[old] = keep
        self.aliases[gone] = keep
        members = [record for record in self.entities.values() if record.person_id == gone]
        for record in members:
            record.person_id = keep
        writer.merge_person(gone, keep, clip_index, moved_aliases, members)
        for name, votes in loser.name_votes.items():
            survivor.name_votes[name] = survivor.name_votes.get(name, 0) + votes
        survivor.name = self._winning_name(survivor)
        survivor.observation_count += loser.observation_count
        if loser.first_clip >= 0 and (survivor.first_clip < 0 or loser.first_clip < survivor.first_clip):
            survivor.first_clip, survivor.first_ns = loser.first_clip, loser.first_ns
        survivor.last_clip = max(survivor.last_clip, loser.last_clip)
        survivor.last_ns = max(survivor.last_ns, loser.last_ns)
        writer.save_entity(survivor)
        if gone in self.entity_memories:
            self.entity_memories.setdefault(keep, []).extend(self.entity_memories[gone])
        return gone, keep

    @staticmethod
    def _winning_name(record: EntityRecord) -> str:
        """The name with most votes (heard_weight), spellings of one name voting together (speech recognition
        spells a name differently from line to line: "Sofia", "Sophie"; m3_memory.graph.name_spellings); within
        the winning group its most-voted spelling. A tie keeps the current name (names do not flicker)."""
        if not record.name_votes:
            return record.name
        groups = spelling_groups(record.name_votes)
        top = max(sum(record.name_votes[n] for n in g) for g in groups)
        winners = [g for g in groups if sum(record.name_votes[n] for n in g) == top]
        kept = [g for g in winners if record.name in g]  # a tie between names keeps the current one's group
        spellings = kept[0] if kept else [n for g in winners for n in g]
        best = max(record.name_votes[n] for n in spellings)
        if record.name in spellings and record.name_votes[record.name] == best:
            return record.name
        return min(n for n in spellings if record.name_votes[n] == best)

    def _vote_name(self, writer: StoreWriter, entity_id: str, name: str, weight: float = 1.0) -> None:
        """One mention's vote for a name, weighted by how surely its words were heard (heard_weight)."""
        person_id = self.person_of(entity_id)
        if person_id is None or not name:
            return
        person = self.entities[person_id]
        person.name_votes[name] = round(person.name_votes.get(name, 0) + weight, 4)
        person.name = self._winning_name(person)
        writer.save_entity(person)
