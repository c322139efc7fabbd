"""The Kafka reader on FakeKafka (the Kafka boundary in memory, given as its clients): the
order over partitions, an exact resume with records in flight, a partition's queue held to
its cap while nothing is lost, and a bad record's way to the dead-letter topic."""

from __future__ import annotations

from typing import Any

import numpy as np

from kafeed.kafka import FakeKafka
from kafeed.loader.nodes.reader import ShardReader
from kafeed.loader.nodes.readers import kafka_reader
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.partition import Ref
from kafeed.schema import make_document

TOPIC = "tokens"
DLQ = "tokens.dlq"
BAD = b"not a document"


def _tokens(partition: int, offset: int) -> list[int]:
    return [1000 * partition + offset + 1] * (1 + offset % 3)


def _fake(partitions: int = 3, records: int = 40, bad: set[tuple[int, int]] | None = None) -> FakeKafka:
    fake = FakeKafka()
    fake.create_topic(TOPIC, partitions)
    fake.create_topic(DLQ, 1)
    producer = fake.producer()
    for p in range(partitions):
        for o in range(records):
            value = BAD if (p, o) in (bad or set()) else make_document(
                np.array(_tokens(p, o)), id=f"{p}-{o}", vocab_size=65536).SerializeToString()
            producer.produce(TOPIC, value, b"k%d" % o, partition=p)
    return fake


def _reader(fake: FakeKafka, **options: Any) -> ShardReader:
    settings = LoaderSettings(topics=(TOPIC,), seq_len=8, eos_id=0, end="latest", **options)
    return kafka_reader(settings, index=0, count=1, clients=fake)


def _take(reader: ShardReader, most: int | None = None) -> list[tuple[Ref, list[int]]]:
    """Up to ``most`` records (every one left when None), not yet delivered."""
    out: list[tuple[Ref, list[int]]] = []
    while most is None or len(out) < most:
        item = reader.next()
        if item is None:
            break
        ref, payload, _ = item
        out.append((ref, payload.tolist()))
    return out


def _every(partitions: int, records: int) -> list[Ref]:
    return [(f"{TOPIC}:{p}", o) for o in range(records) for p in range(partitions)]


def test_a_bounded_read_hands_out_every_record_once_the_partitions_in_turn() -> None:
    reader = _reader(_fake())
    reader.open()
    taken = _take(reader)
    reader.close()
    assert [ref for ref, _ in taken] == _every(3, 40)
    assert all(tokens == _tokens(int(ref[0].split(":")[1]), ref[1]) for ref, tokens in taken)
    assert reader.stats["records"] == 120 and reader.stats["bad"] == 0


def test_an_exact_resume_re_reads_the_records_in_flight_and_goes_on_after_the_rest() -> None:
    fake = _fake()
    first = _reader(fake)
    first.open()
    taken = _take(first, 50)
    held = [ref for ref, _ in taken[-3:]]  # still in a shuffle buffer when the state was taken
    first.delivered_many([ref for ref, _ in taken[:-3]])
    state = first.state()
    first.close()

    second = _reader(fake)
    second.reset(state, in_flight=held)
    second.open()
    restored = second.restored()
    assert sorted(restored) == sorted(held)
    assert all(restored[ref].tolist() == dict(taken)[ref] for ref in held)
    rest = _take(second)
    second.close()
    refs = [ref for ref, _ in taken] + [ref for ref, _ in rest]
    assert sorted(refs) == sorted(_every(3, 40))  # every record once: none lost, none twice
    assert [ref for ref, _ in rest] == _every(3, 40)[50:]  # and in the order of one read


def test_a_partition_queue_stays_at_its_cap_and_nothing_is_lost() -> None:
    reader = _reader(_fake(records=60), queue_records=5, consume_batch=100)
    reader.open()
    held: list[int] = []
    taken: list[Ref] = []
    while (item := reader.next()) is not None:
        taken.append(item[0])
        reader.delivered(item[0])
        held.append(max(len(part.queue) for part in reader.parts))
    reader.close()
    assert taken == _every(3, 60)
    assert max(held) <= 5


def test_a_bad_record_is_skipped_and_dead_lettered_with_its_key_and_where_it_came_from() -> None:
    fake = _fake(bad={(1, 7)})
    reader = _reader(fake, dlq_topic=DLQ)
    reader.open()
    taken = [ref for ref, _ in _take(reader)]
    reader.close()
    assert taken == [ref for ref in _every(3, 40) if ref != (f"{TOPIC}:1", 7)]
    assert reader.stats["bad"] == 1
    [dead] = fake.log(DLQ, 0)
    assert (dead.key, dead.value) == (b"k7", BAD)
    headers = dict(dead.headers or [])
    assert headers["kafeed.source.topic"] == TOPIC.encode()
    assert (headers["kafeed.source.partition"], headers["kafeed.source.offset"]) == (b"1", b"7")
