"""What was heard and is not memorized yet: the clip still open, and closed clips waiting for the memorizer.

A clip becomes memory when its window closes (clip_seconds) and the memorizer has run (seconds with a
model), so a robot asked "how much did she say the loaves cost?" right after hearing it found nothing.
Until its clip is stored, each line heard is searchable word for word as an episodic memory
`<voice_N> says: "..."` (the memory id of a voice memory already knows; "Someone (voice unclear)", as the
rules memorizer writes a line without a voice, for one it has not met yet), scored against the query
like a stored memory; the clip competes with the stored clips on its best line. Heard lines are not
memories: no node of the graph, no fact, no name; a clip's lines go when the clip is stored.

Pure logic (numpy): the caller hands over the clips (ClipEvidence), the perception id -> memory id map
and the embedder.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import numpy as np

from m3_memory.graph.records import KIND_EPISODIC, ClipEvidence, ClipRecord, TextNode
from m3_memory.memorize.rules import said
from m3_memory.search.where import NOWHERE, Where

PREFIX = "heard_"  # node ids of heard lines: heard_<clip index>_<line>, never a stored memory's id


def heard_nodes(clip: ClipEvidence, ids: Mapping[str, str]) -> list[TextNode]:
    """The clip's transcribed lines in time order, as episodic memories (seq -1: not stored)."""
    lines = sorted((v for v in clip.voices if v.transcript.strip()), key=lambda v: (v.start_ns, v.segment_id))
    nodes = []
    for number, voice in enumerate(lines):
        tag = ids.get(voice.voice_id, "")
        text = said(tag, voice.transcript.strip())
        node_id = f"{PREFIX}{clip.clip_index}_{number}"
        entity_ids = [tag] if tag else []
        nodes.append(
            TextNode(node_id, -1, KIND_EPISODIC, text, clip.clip_index, voice.start_ns, voice.end_ns, 1.0, entity_ids)
        )
    return nodes


def heard_records(
    clips: list[ClipEvidence],
    ids: Mapping[str, str],
    embed: Callable[[list[str]], np.ndarray],
    vectors: np.ndarray,
    threshold: float,
    before_clip: int = -1,
    before_stamp_ns: int = 0,
    where: Where = NOWHERE,
    stored: Collection[int] = (),
) -> list[ClipRecord]:
    """One record per clip with a line at or above `threshold` (best line's cosine over the query's
    `vectors`), within the as-of limits and the time window; clips in `stored` are left out (stored
    while this was asked: the memory has them). A place window keeps no heard line (no place yet)."""
    records = []
    for clip in clips:
        if clip.clip_index in stored or (before_clip >= 0 and clip.clip_index > before_clip):
            continue
        nodes = [
            node
            for node in heard_nodes(clip, ids)
            if (before_stamp_ns <= 0 or node.start_ns <= before_stamp_ns) and where.keeps(node)
        ]
        if not nodes:
            continue
        scores = (embed([node.text for node in nodes]) @ np.asarray(vectors, np.float32).T).max(axis=1)
        best = float(scores.max())
        if best < threshold:
            continue
        entity_ids = sorted({i for node in nodes for i in node.entity_ids})
        node_scores = {node.node_id: float(s) for node, s in zip(nodes, scores, strict=True)}
        records.append(
            ClipRecord(
                clip.clip_index,
                clip.start_ns,
                clip.end_ns,
                0,
                nodes,
                [],
                entity_ids,
                best,
                node_scores,
                heard=True,
            )
        )
    return records
