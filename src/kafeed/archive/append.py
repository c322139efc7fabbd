"""Data files for rows, and the commit that appends them with a snapshot summary.

The two steps are apart so the sink can write the files of a batch while it consumes the next
one (kafeed.archive.pending) and commit them later in one catalog commit: until a snapshot
references them, written files are invisible (orphans if the commit never comes), so writing
early changes nothing about what a reader or a crash can see.

pyiceberg's ``Table.append`` splits a table by partition by filtering it once per partition
value and copying each part again, even when there is one part: for a batch of token lists
that doubles the cost of writing it. A sink's batch nearly always falls in one partition (one
topic, one day), so :func:`write_data_files` writes it as it is, and splits (one filter per
partition value) only a batch that spans days; the files are made with the pieces
``append`` is made of (bin packing to the target file size, the Parquet writer). Rows keep
their order, so a batch sorted by (partition, offset) gives files sorted that way.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

_TARGET_FILE_SIZE = "write.target-file-size-bytes"
_TARGET_FILE_SIZE_DEFAULT = 512 * 1024 * 1024  # pyiceberg's default
_MANIFEST_MERGE = "commit.manifest-merge.enabled"


def partitions(metadata: Any, rows: pa.Table) -> list[tuple[Any, pa.Table]]:
    """``rows`` split by the table partition each falls in (``metadata``: the table's): (partition
    key, rows) pairs in the order of the partition values; one pair, no copy, when all fall in one."""
    import pyarrow.compute as pc
    from pyiceberg.partitioning import PartitionFieldValue, PartitionKey

    spec, schema = metadata.spec(), metadata.schema()
    fields = list(spec.fields)
    columns = [field.transform.pyarrow_transform(schema.find_field(field.source_id).field_type)(
        rows.column(schema.find_column_name(field.source_id))) for field in fields]
    if all(len(pc.unique(column)) == 1 for column in columns):
        values = [column[0].as_py() for column in columns]
        groups = [(values, rows)]
    else:
        import pyarrow as pa

        names = [f"p{i}" for i in range(len(columns))]
        keyed = pa.table(dict(zip(names, columns, strict=True)))
        distinct = keyed.group_by(names).aggregate([]).sort_by([(n, "ascending") for n in names])
        groups = []
        for combo in distinct.to_pylist():
            mask = None
            for name, column in zip(names, columns, strict=True):
                cond = pc.equal(column, pa.scalar(combo[name], column.type))
                mask = cond if mask is None else pc.and_(mask, cond)
            groups.append(([combo[n] for n in names], rows.filter(mask)))
    # Positional: the first field is field_values in newer pyiceberg, raw_partition_field_values in older.
    return [(PartitionKey([PartitionFieldValue(f, v) for f, v in zip(fields, values, strict=True)],
                          spec, schema), part) for values, part in groups]


def write_data_files(metadata: Any, io: Any, rows: pa.Table) -> list[Any]:
    """Write ``rows`` into new Parquet data files of the table with ``metadata`` through its FileIO
    ``io`` (nothing committed); their DataFiles."""
    from pyiceberg.io.pyarrow import bin_pack_arrow_table, pyarrow_to_schema, write_file
    from pyiceberg.table import WriteTask

    if not rows.num_rows:
        return []
    target = int(metadata.properties.get(_TARGET_FILE_SIZE, _TARGET_FILE_SIZE_DEFAULT))
    task_schema = pyarrow_to_schema(rows.schema, name_mapping=metadata.schema().name_mapping)
    write_uuid = uuid.uuid4()
    tasks = [WriteTask(write_uuid=write_uuid, task_id=i, schema=task_schema, record_batches=batches,
                       partition_key=key)
             for i, (key, batches) in enumerate((key, batches) for key, part in partitions(metadata, rows)
                                                for batches in bin_pack_arrow_table(part, target))]
    return list(write_file(io=io, table_metadata=metadata, tasks=iter(tasks)))


def commit_files(table: Any, data_files: Sequence[Any], summary: Mapping[str, str]) -> None:
    """Append ``data_files`` to ``table`` in one snapshot carrying ``summary``; a commit that lost a
    race raises ``CommitFailedException`` as ``Table.append`` does."""
    with table.transaction() as txn:
        merge = txn.table_metadata.properties.get(_MANIFEST_MERGE, "false").lower() == "true"
        update = txn.update_snapshot(snapshot_properties=dict(summary))
        with update.merge_append() if merge else update.fast_append() as producer:
            for data_file in data_files:
                producer.append_data_file(data_file)

