"""The archive table's layout: one Iceberg schema for every record type, partitioned by
topic and day, sorted by Kafka partition and offset; and the property names kafeed keeps
on the table and in its snapshot summaries.

Columns that a record type does not have are null. ``value`` holds the record's bytes
when they cannot be rebuilt from the decoded columns (every record of ``raw`` tables,
and a protobuf record whose producer did not serialize deterministically), so a replay
gives back the exact bytes either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pyarrow as pa

Kind = Literal["tokens", "samples", "raw"]
KINDS: tuple[Kind, ...] = ("tokens", "samples", "raw")

#: Table properties written when kafeed creates the table: whose records it holds.
PROP_TOPIC = "kafeed.archive.topic"
PROP_CLUSTER = "kafeed.archive.cluster-id"
PROP_KIND = "kafeed.archive.kind"
PROP_SCHEMA = "kafeed.archive.schema-version"
SCHEMA_VERSION = "1"
#: Snapshot summary key prefix of the positions: ``kafeed.offsets.<cluster id>.<topic>``.
OFFSETS_PREFIX = "kafeed.offsets."
#: Snapshot summary key prefix of the id of the topic the positions belong to.
TOPIC_ID_PREFIX = "kafeed.topic-id."

# (field id, name, type name, required): the one list both schemas are built from.
_FIELDS: tuple[tuple[int, str, str, bool], ...] = (
    (1, "topic", "string", True),
    (2, "partition", "int", True),
    (3, "offset", "long", True),
    (4, "timestamp", "timestamptz", True),
    (5, "key", "binary", False),
    (6, "headers", "headers", False),
    (7, "kind", "string", True),
    (8, "id", "string", False),
    (9, "source", "string", False),
    (10, "event_time_ms", "long", False),
    (11, "tokens", "list<long>", False),
    (12, "dtype", "string", False),
    (13, "num_tokens", "int", False),
    (14, "tokenizer", "string", False),
    (15, "input_topic", "string", False),
    (16, "input_partition", "int", False),
    (17, "input_offset", "long", False),
    (18, "input_data", "binary", False),
    (19, "targets", "list<float>", False),
    (20, "metadata", "map<string,string>", False),
    (21, "value", "binary", False),
)
COLUMNS: tuple[str, ...] = tuple(name for _, name, _, _ in _FIELDS)
# Ids of nested fields (list elements, map entries, header structs) start after the columns.
_NESTED_BASE = 100


def offsets_key(cluster_id: str, topic: str) -> str:
    """The snapshot summary key of ``topic``'s positions on cluster ``cluster_id``."""
    return f"{OFFSETS_PREFIX}{cluster_id}.{topic}"


def topic_id_key(cluster_id: str, topic: str) -> str:
    """The snapshot summary key of the id of the topic named ``topic`` whose positions the table holds."""
    return f"{TOPIC_ID_PREFIX}{cluster_id}.{topic}"


def iceberg_schema() -> Any:
    """The table's Iceberg schema."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        FloatType,
        IntegerType,
        ListType,
        LongType,
        MapType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    nested = iter(range(_NESTED_BASE, _NESTED_BASE + 100))

    def make(kind: str) -> Any:
        simple = {"string": StringType(), "int": IntegerType(), "long": LongType(),
                  "binary": BinaryType(), "timestamptz": TimestamptzType()}
        if kind in simple:
            return simple[kind]
        if kind == "list<long>":
            return ListType(element_id=next(nested), element=LongType(), element_required=True)
        if kind == "list<float>":
            return ListType(element_id=next(nested), element=FloatType(), element_required=True)
        if kind == "map<string,string>":
            return MapType(key_id=next(nested), key_type=StringType(), value_id=next(nested),
                           value_type=StringType(), value_required=True)
        if kind == "headers":
            entry = StructType(NestedField(next(nested), "key", StringType(), required=True),
                               NestedField(next(nested), "value", BinaryType(), required=False))
            return ListType(element_id=next(nested), element=entry, element_required=True)
        raise ValueError(kind)

    return Schema(*(NestedField(fid, name, make(kind), required=req) for fid, name, kind, req in _FIELDS))


def arrow_schema() -> pa.Schema:
    """The Arrow schema rows are built in; pyiceberg matches its columns to the table's by name
    (field ids are the table's business: the catalog renumbers them on create)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(iceberg_schema(), include_field_ids=False)


def partition_spec(schema: Any) -> Any:
    """Hidden partitioning: identity on topic, day of the record timestamp."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, IdentityTransform

    return PartitionSpec(
        PartitionField(source_id=schema.find_field("topic").field_id, field_id=1000,
                       transform=IdentityTransform(), name="topic"),
        PartitionField(source_id=schema.find_field("timestamp").field_id, field_id=1001,
                       transform=DayTransform(), name="timestamp_day"),
    )


def sort_order(schema: Any) -> Any:
    """Rows within a file are in (partition, offset) order."""
    from pyiceberg.table.sorting import SortField, SortOrder
    from pyiceberg.transforms import IdentityTransform

    return SortOrder(
        SortField(source_id=schema.find_field("partition").field_id, transform=IdentityTransform()),
        SortField(source_id=schema.find_field("offset").field_id, transform=IdentityTransform()),
    )
