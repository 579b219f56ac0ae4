"""Copy a whole memory from one back-end to another (SQLite <-> Milvus), through the storage
interface only: the source's snapshot is replayed into one transaction of the destination, so
any pair of back-ends works and the copy is all or nothing where the destination is transactional.

What is not copied: clip keyframes (a Milvus memory keeps none), and the saved text index (rebuilt).
"""

from __future__ import annotations

from m3_memory.graph.backend import MemoryBackend
from m3_memory.graph.records import KIND_FACE


def counts(snapshot) -> dict[str, int]:
    """What a copy is verified by: the same numbers on both sides."""
    kinds = [record.kind for record in snapshot.entities]
    return {
        "clips": len(snapshot.clips),
        "episodic": sum(node.kind == "episodic" for node in snapshot.text_nodes),
        "semantic": sum(node.kind == "semantic" for node in snapshot.text_nodes),
        "faces": kinds.count("face"),
        "voices": kinds.count("voice"),
        "persons": kinds.count("person"),
        "merged_ids": len(snapshot.aliases),
        "evidence": len(snapshot.evidence),
        "weight_changes": len(snapshot.node_clip_deltas),
        "places": sum(node.place is not None for node in snapshot.text_nodes),
        "sightings": len(snapshot.sightings),
    }


def copy_memory(source: MemoryBackend, destination: MemoryBackend, text_dim: int) -> dict[str, int]:
    """Copy everything from source into an empty destination; returns the counts copied."""
    snap = source.load(text_dim)
    with destination.transaction() as writer:
        for key, value in sorted(snap.meta.items()):
            if key not in ("schema_version", "format", "created_ns"):  # the destination's own
                writer.set_meta(key, value)
        for kind, value in sorted(snap.counters.items()):
            writer.set_counter(kind, value)
        writer.add_clips([(index, start, end, stored, ids, b"") for index, start, end, stored, ids in snap.clips])
        for index, *_ in snap.clips:
            if path := source.clip_path(index):
                writer.add_clip_path(index, path)
        for sighting in snap.sightings:
            writer.add_sighting(sighting)
        count = len(snap.text_nodes)
        writer.add_text_nodes(snap.text_nodes, snap.text_vectors[:count])
        for node in snap.text_nodes:
            if node.weight != 1.0:
                writer.set_weight(node)
            if node.superseded_by:
                writer.set_validity(node)
        for node_id, clip_index, delta in snap.node_clip_deltas:
            writer.add_node_clip(node_id, clip_index, delta)
        for record in snap.entities:
            writer.add_entity(record)
            writer.save_entity(record)
            if record.kind == KIND_FACE and (jpeg := source.entity_crop(record.entity_id)):
                writer.set_crop(record.entity_id, record.crop_score, jpeg)
        for entity_id, samples in sorted(snap.entity_samples.items()):
            if samples:
                writer.set_samples(entity_id, samples)
        for old, new in sorted(snap.aliases.items()):
            writer.merge_person(old, new, snap.alias_clips.get(old, -1), [], [])
        for (id1, id2), (confidence, evidence_count) in sorted(snap.evidence.items()):
            clip_index, stamp_ns = snap.evidence_at.get((id1, id2), (-1, 0))
            writer.put_match(id1, id2, confidence, evidence_count, clip_index, stamp_ns)
    return counts(snap)


def verify_copy(source: MemoryBackend, destination: MemoryBackend, text_dim: int) -> list[str]:
    """Differences between the two memories (empty = the copy is complete): counts, then every
    memory's text, weight and entities, every entity record and every merge."""
    a, b = source.load(text_dim), destination.load(text_dim)
    problems = [f"{key}: {value} in the source, {counts(b)[key]} in the copy"
                for key, value in counts(a).items() if counts(b)[key] != value]  # fmt: skip

    def node(n):
        return n.text, n.weight, n.clip_index, n.entity_ids, n.place, n.valid_until_ns, n.superseded_by

    nodes_a, nodes_b = {n.node_id: node(n) for n in a.text_nodes}, {n.node_id: node(n) for n in b.text_nodes}
    problems += [f"memory {node_id} differs" for node_id in sorted(nodes_a) if nodes_a[node_id] != nodes_b.get(node_id)]
    entities_b = {r.entity_id: r for r in b.entities}
    problems += [f"entity {r.entity_id} differs" for r in a.entities if entities_b.get(r.entity_id) != r]
    if a.aliases != b.aliases:
        problems.append("merged ids differ")
    return problems
