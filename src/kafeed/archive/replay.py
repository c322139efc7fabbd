"""Produce a table's records, or a filtered part of them, into a topic for a new run.

Each record goes back with its key, headers and exact bytes (kafeed.archive.rows), in
offset order per source partition, to the same partition number when the target topic has
it (else partitioned by key). The whole replay is one Kafka transaction: a replay that
fails or is killed leaves nothing visible to read_committed readers; run it again.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from kafeed.archive.catalog import check_table, load_table, open_catalog
from kafeed.archive.rows import record_headers, record_value
from kafeed.archive.schema import PROP_TOPIC
from kafeed.archive.settings import CatalogSettings
from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError, TopicError, translate_kafka_error
from kafeed.kafka import TransactionalProducer, admin_client

# One transaction for the whole replay, however long it takes to produce.
TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000


@dataclass(frozen=True)
class ReplayResult:
    records: int
    partitions: int


def _filter(since: datetime | None, until: datetime | None, source: str | None) -> list[str]:
    terms = []
    if since is not None:
        terms.append(f"timestamp >= '{since.isoformat()}'")
    if until is not None:
        terms.append(f"timestamp < '{until.isoformat()}'")
    if source is not None:
        terms.append("source = '{}'".format(source.replace("'", "''")))
    return terms


def replay(table_name: str, catalog: CatalogSettings, connection: ConnectionSettings, *, topic: str,
           since: datetime | None = None, until: datetime | None = None,
           source: str | None = None) -> ReplayResult:
    """Produce the rows of ``table_name`` matching the filters into ``topic`` (which must exist)."""
    table = load_table(open_catalog(catalog), table_name)
    check_table(table, table_name, topic=table.properties.get(PROP_TOPIC, ""), cluster_id=None, kind=None)
    try:
        meta = admin_client(connection).list_topics(topic, timeout=15)
    except Exception as exc:
        raise translate_kafka_error(exc, action=f"read the metadata of topic {topic!r}") from exc
    info = meta.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        raise TopicError(f"Topic {topic!r} does not exist.",
                         hint="Create it first with `kafeed topic create`.")
    target_partitions = len(info.partitions)
    terms = _filter(since, until, source)
    parts = table.scan(row_filter=" AND ".join(terms) or "partition >= 0",
                       selected_fields=("partition",)).to_arrow()["partition"].unique()
    producer = TransactionalProducer(
        connection, transactional_id=f"kafeed-replay.{topic}.{socket.gethostname()}-{os.getpid()}",
        stage="replay", config={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": 20})
    records = 0
    try:
        producer.init()
        producer.begin()
        for p in sorted(parts.to_pylist()):
            rows = table.scan(row_filter=" AND ".join([*terms, f"partition = {int(p)}"])).to_arrow()
            rows = rows.sort_by([("offset", "ascending")])
            target = p if p < target_partitions else -1
            for row in rows.to_pylist():
                headers = cast("list[tuple[str, bytes]]", list(record_headers(row)))
                producer.produce(topic, record_value(row), row["key"], partition=target,
                                 headers=headers or None)
                records += 1
        producer.commit()
    except BaseException as exc:
        if producer.in_transaction:
            try:
                producer.abort()
            except Exception:  # the original error is the one to report
                pass
        if isinstance(exc, KafeedError) or not isinstance(exc, Exception):
            raise
        raise translate_kafka_error(exc, action=f"replay into topic {topic!r}") from exc
    return ReplayResult(records=records, partitions=len(parts))
