"""Append one batch of rows and its snapshot summary to the table, in one catalog commit.

pyiceberg's ``Table.append`` splits a table by partition by filtering it once per
partition value and copying each part again, even when there is one part: for a batch of
token lists that doubles the cost of writing it. A sink's batch nearly always falls in one
partition (one topic, one day), so :func:`append_rows` writes it as it is, with the same
pyiceberg pieces ``append`` is made of (bin packing to the target file size, the Parquet
writer, a snapshot producer in a transaction), and leaves a batch that spans days to
``Table.append``. Either way data files and summary land in one commit, and a commit that
lost a race raises ``CommitFailedException`` as ``append`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

_TARGET_FILE_SIZE = "write.target-file-size-bytes"
_TARGET_FILE_SIZE_DEFAULT = 512 * 1024 * 1024  # pyiceberg's default
_MANIFEST_MERGE = "commit.manifest-merge.enabled"


def single_partition(table: Any, rows: pa.Table) -> Any:
    """The partition key of ``rows`` if they all fall in one partition of ``table``, else None."""
    import pyarrow.compute as pc
    from pyiceberg.partitioning import PartitionFieldValue, PartitionKey

    metadata = table.metadata
    spec, schema = metadata.spec(), metadata.schema()
    values = []
    for field in spec.fields:
        source = schema.find_field(field.source_id)
        column = rows.column(schema.find_column_name(field.source_id))
        distinct = pc.unique(field.transform.pyarrow_transform(source.field_type)(column))
        if len(distinct) != 1:
            return None
        values.append(PartitionFieldValue(field, distinct[0].as_py()))
    # Positional: the first field is field_values in newer pyiceberg, raw_partition_field_values in older.
    return PartitionKey(values, spec, schema)


def append_rows(table: Any, rows: pa.Table, summary: Mapping[str, str]) -> None:
    """``table.append(rows, snapshot_properties=summary)``, without the copies when ``rows`` fall in
    one partition."""
    key = single_partition(table, rows) if rows.num_rows else None
    if key is None:
        table.append(rows, snapshot_properties=dict(summary))
        return
    from pyiceberg.io.pyarrow import bin_pack_arrow_table, pyarrow_to_schema, write_file
    from pyiceberg.table import WriteTask

    with table.transaction() as txn:
        metadata = txn.table_metadata
        target = int(metadata.properties.get(_TARGET_FILE_SIZE, _TARGET_FILE_SIZE_DEFAULT))
        task_schema = pyarrow_to_schema(rows.schema, name_mapping=metadata.schema().name_mapping)
        update = txn.update_snapshot(snapshot_properties=dict(summary))
        merge = metadata.properties.get(_MANIFEST_MERGE, "false").lower() == "true"
        with update.merge_append() if merge else update.fast_append() as producer:
            tasks = (WriteTask(write_uuid=producer.commit_uuid, task_id=i, schema=task_schema,
                               record_batches=batches, partition_key=key)
                     for i, batches in enumerate(bin_pack_arrow_table(rows, target)))
            for data_file in write_file(io=table.io, table_metadata=metadata, tasks=tasks):
                producer.append_data_file(data_file)
