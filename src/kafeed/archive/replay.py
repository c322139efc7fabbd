"""Produce a table's records, or a filtered part of them, into a topic for a new run.

Each record goes back with its key, headers and exact bytes (kafeed.archive.rows), in
offset order per source partition, to the same partition number when the target topic has
it (else partitioned by key). The whole replay is one Kafka transaction: a replay that
fails or is killed leaves nothing visible to read_committed readers; run it again.

A replay is idempotent. Every record it writes carries one more header,
``kafeed.replay.source`` = ``<cluster id>/<topic>/<partition>/<offset>``: where the record
was first written, which names it whatever table or filter it is replayed through. Before
writing, a replay reads the target topic to its end (read_committed) and leaves out every
record whose source is already there, so running the same replay again writes nothing, and
a wider one writes only what is missing. Replays into one topic of one source share a
transactional id, so a second replay started while one is open fences it (its open
transaction is aborted) before reading what is there. That read also decodes some of the
records already there: a topic that holds the other record kind than the table is refused.

A table is never replayed into the topic it archives, on the cluster it was archived
from: those records are there already, or were deleted by retention on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from kafeed.archive.catalog import check_table, load_table, open_catalog
from kafeed.archive.columns import DECODERS
from kafeed.archive.rows import record_headers, record_value
from kafeed.archive.schema import KINDS, PROP_CLUSTER, PROP_KIND, PROP_TOPIC, Kind
from kafeed.archive.settings import CatalogSettings
from kafeed.archive.topic_identity import existing_topic_metadata
from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, KafeedError, KafkaOperationError
from kafeed.kafka import KafkaClients, TransactionalProducer

# One transaction for the whole replay, however long it takes to produce.
TRANSACTION_TIMEOUT_MS = 15 * 60 * 1000
#: The header naming a replayed record's first home: ``cluster/topic/partition/offset``.
SOURCE_HEADER = "kafeed.replay.source"
#: How long reading the target topic to its end may go without progress.
READ_STALL_S = 60.0


@dataclass(frozen=True)
class ReplayResult:
    records: int
    partitions: int
    #: Matching records left out because an earlier replay already wrote them to the topic.
    already_there: int = 0


def _filter(since: datetime | None, until: datetime | None, source: str | None) -> list[str]:
    terms = []
    if since is not None:
        terms.append(f"timestamp >= '{since.isoformat()}'")
    if until is not None:
        terms.append(f"timestamp < '{until.isoformat()}'")
    if source is not None:
        terms.append("source = '{}'".format(source.replace("'", "''")))
    return terms


#: How many of the target topic's records are decoded to tell which record kind it holds.
KIND_SAMPLE = 200


@dataclass
class TargetTopic:
    """What a replay found in its target: positions it already wrote, and some values."""

    replayed: set[tuple[int, int]] = field(default_factory=set)
    values: list[bytes] = field(default_factory=list)


def read_target(connection: ConnectionSettings, topic: str, origin: str) -> TargetTopic:
    """``topic`` read once to its end (committed records): the (partition, offset) at
    ``origin`` (``cluster/topic``) of every record a replay already wrote there, and up to
    :data:`KIND_SAMPLE` values."""
    prefix = f"{origin}/".encode()
    found = TargetTopic()
    hint = "Check the cluster with `kafeed broker status`, then run the replay again."
    for msg in KafkaClients(connection).read_to_end(topic, timeout_s=READ_STALL_S, hint=hint):
        value = msg.value()
        if value and len(found.values) < KIND_SAMPLE:
            found.values.append(value)
        for key, header in msg.headers() or ():
            if key == SOURCE_HEADER and header and header.startswith(prefix):
                partition, _, offset = header[len(prefix):].decode().partition("/")
                found.replayed.add((int(partition), int(offset)))
    return found


def check_target_kind(values: list[bytes], kind: str, topic: str, table_name: str) -> None:
    """Refuse a target whose records are of the other record kind than the table's: a loader
    reading it would skip every replayed record (or every record already there). An empty
    topic, or one of neither kind, tells nothing and is accepted."""
    kinds: list[Kind] = [k for k in KINDS if k != "raw"]
    if not values or kind not in kinds:
        return
    counts: dict[str, int] = {}
    for name in kinds:
        decoder = DECODERS[name]()
        decoder.decode(list[bytes | None](values))
        counts[name] = decoder.count
    other = max((k for k in kinds if k != kind), key=lambda k: counts[k])
    if counts[kind] == 0 and counts[other] > 0:
        raise ConfigError(f"Topic {topic!r} holds {other} records and table {table_name!r} holds {kind}: "
                          f"a loader reading {topic!r} would skip one kind or the other.",
                          hint=f"Replay into a topic of {kind} records, or a new one "
                          "(`kafeed topic create NAME ...`).")


def replay(table_name: str, catalog: CatalogSettings, connection: ConnectionSettings, *, topic: str,
           since: datetime | None = None, until: datetime | None = None,
           source: str | None = None) -> ReplayResult:
    """Produce the rows of ``table_name`` matching the filters into ``topic`` (which must
    exist), leaving out those an earlier replay already wrote there."""
    table = load_table(open_catalog(catalog), table_name)
    source_topic = table.properties.get(PROP_TOPIC, "")
    check_table(table, table_name, topic=source_topic, cluster_id=None, kind=None)
    kind = table.properties.get(PROP_KIND, "")
    meta = existing_topic_metadata(KafkaClients(connection).admin(), topic,
                                   hint="Create it first with `kafeed topic create`.")
    source_cluster = table.properties.get(PROP_CLUSTER, "")
    if topic == source_topic and meta.cluster_id == source_cluster:
        raise ConfigError(f"Table {table_name!r} is the archive of topic {topic!r} on this cluster: its "
                          "records are there already (or were deleted by retention on purpose).",
                          hint="Replay into a new topic: `kafeed topic create NAME ...`, then "
                          "`kafeed replay --topic NAME`.")
    origin = f"{source_cluster}/{source_topic}"
    target_partitions = len(meta.topics[topic].partitions)
    terms = _filter(since, until, source)
    parts = table.scan(row_filter=" AND ".join(terms) or "partition >= 0",
                       selected_fields=("partition",)).to_arrow()["partition"].unique()
    producer = TransactionalProducer(
        connection, transactional_id=f"kafeed-replay.{topic}.{source_cluster}.{source_topic}",
        stage="replay", config={"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": 20})
    records = skipped = 0
    try:
        # First fence (and abort) an earlier replay's open transaction, then see what is there.
        producer.init()
        there = read_target(connection, topic, origin)
        check_target_kind(there.values, kind, topic, table_name)
        done = there.replayed
        producer.begin()
        for p in sorted(parts.to_pylist()):
            rows = table.scan(row_filter=" AND ".join([*terms, f"partition = {int(p)}"])).to_arrow()
            rows = rows.sort_by([("offset", "ascending")])
            target = p if p < target_partitions else -1
            for row in rows.to_pylist():
                if (row["partition"], row["offset"]) in done:
                    skipped += 1
                    continue
                headers = cast("list[tuple[str, bytes]]", list(record_headers(row)))
                headers.append((SOURCE_HEADER, f"{origin}/{row['partition']}/{row['offset']}".encode()))
                producer.produce(topic, record_value(row), row["key"], partition=target, headers=headers)
                records += 1
        producer.commit()
    except BaseException as exc:
        _abort(producer)
        if isinstance(exc, KafeedError) or not isinstance(exc, Exception):
            raise
        raise KafkaOperationError(f"Could not replay into topic {topic!r}: {exc}.") from exc
    return ReplayResult(records=records, partitions=len(parts), already_there=skipped)


def _abort(producer: Any) -> None:
    if producer.in_transaction:
        try:
            producer.abort()
        except Exception:  # the original error is the one to report
            pass
