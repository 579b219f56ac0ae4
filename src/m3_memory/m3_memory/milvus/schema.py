"""The Milvus back-end's two collections: their schemas, their creation when missing, and what an
existing text collection holds (place columns, vector dimension).

Why apart from the back-end (m3_memory.milvus.backend): the layout of `<prefix>_text` and
`<prefix>_records` is written down in this one place, and the back-end only checks that what it
finds fits and reads and writes rows.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from m3_memory.errors import StoreError
from m3_memory.milvus.writer import MAX_TEXT_BYTES, PLACE_FIELDS, PLACEHOLDER, MilvusConfig

if TYPE_CHECKING:
    from pymilvus import MilvusClient


def create_missing(
    client: MilvusClient, config: MilvusConfig, text_name: str, records_name: str, text_dim: int
) -> None:
    """Create the collections Milvus lacks; text_dim 0 (open existing ones with their dimension) with
    no text collection is a StoreError."""
    from pymilvus import DataType, MilvusClient

    if text_dim == 0 and not client.has_collection(text_name):
        raise StoreError(f"Milvus holds no collection {text_name} (no memory with this prefix)")
    if not client.has_collection(text_name):
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("node_key", DataType.VARCHAR, is_primary=True, max_length=256)
        schema.add_field("robot_id", DataType.VARCHAR, max_length=128)
        schema.add_field("node_id", DataType.VARCHAR, max_length=128)
        for name in ("seq", "clip_index", "start_ns", "end_ns"):
            schema.add_field(name, DataType.INT64)
        schema.add_field("kind", DataType.VARCHAR, max_length=16)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        schema.add_field("entity_ids", DataType.JSON)
        for name in ("place_frame", "place_region"):
            schema.add_field(name, DataType.VARCHAR, max_length=128)
        for name in ("place_x", "place_y", "place_yaw"):
            schema.add_field(name, DataType.DOUBLE)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=text_dim)
        index = client.prepare_index_params()
        index.add_index(
            field_name="vector", index_type=config.index_type, metric_type="COSINE",
            params=json.loads(config.index_params or "{}"),
        )  # fmt: skip
        create_collection(client, text_name, schema, index)
    if not client.has_collection(records_name):
        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("key", DataType.VARCHAR, is_primary=True, max_length=512)
        schema.add_field("robot_id", DataType.VARCHAR, max_length=128)
        schema.add_field("kind", DataType.VARCHAR, max_length=32)
        schema.add_field("data", DataType.JSON)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=len(PLACEHOLDER))
        index = client.prepare_index_params()
        index.add_index(field_name="vector", index_type="FLAT", metric_type="L2")
        create_collection(client, records_name, schema, index)


def text_columns(client: MilvusClient, text_name: str) -> tuple[bool, int | None]:
    """(whether the text collection has PLACE_FIELDS, its vector dimension; None: no vector field)."""
    fields = client.describe_collection(text_name)["fields"]
    place_columns = set(PLACE_FIELDS) <= {f["name"] for f in fields}  # False: made before places
    dim = next((int(f["params"]["dim"]) for f in fields if f["name"] == "vector"), None)
    return place_columns, dim


def create_collection(client: MilvusClient, name: str, schema, index) -> None:
    """Create a collection; another robot of the fleet creating it at the same moment is fine."""
    from pymilvus.exceptions import MilvusException

    try:
        client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
    except MilvusException:
        deadline = time.monotonic() + 10.0  # the other robot's creation may still be under way
        while not client.has_collection(name):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
