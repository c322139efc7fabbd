"""How the reader pulls from librdkafka, with a consumer that stands in for it (so what it
does is certain): a partition's queue never passes queue_records though one consume() brings
more of it, a live reader never holds a fresh record back for a batch to fill, and a resumed
partition is fetched at once, not when librdkafka's idle fetcher next looks.

The stand-in models librdkafka where kafeed.kafka.FakeKafka does not need to (a consume()
that brings more than asked, an idle fetcher, records handed out twice). It reaches the
reader the public way, as the clients a reader is built with (``kafka_reader(...,
clients=)``), wrapped in kafeed.kafka.Consumer as KafkaClients wraps librdkafka's; the
reader opens it itself."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
from confluent_kafka import KafkaError

from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.kafka import Consumer as TypedConsumer
from kafeed.kafka import KafkaClients
from kafeed.loader.nodes.reader import ShardReader
from kafeed.loader.nodes.readers import kafka_reader
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.kafka_source import BOUNDED_FETCH_WAIT_MS, KafkaSource
from kafeed.schema import make_document

CAP = 10
RECORDS = 100  # per partition


class Record:
    """What the reader reads of a confluent_kafka Message (``eof``: a partition-EOF event)."""

    def __init__(self, topic: str, partition: int, offset: int, value: bytes, eof: bool = False) -> None:
        self._where = (topic, partition, offset)
        self._value = value
        self._eof = eof

    def error(self) -> KafkaError | None:
        return KafkaError(KafkaError._PARTITION_EOF) if self._eof else None

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_000 + self._where[2]

    def __len__(self) -> int:
        return len(self._value)


class Consumer:
    """librdkafka as far as the reader's pulls are concerned: ``consume()`` hands out whole runs
    of each partition not paused, from its position on, then one EOF event at its end; a
    pause applies to later calls only and leaves the position after what was handed out (as
    librdkafka's does); seek moves it. ``arriving`` records come in while a call waits."""

    def __init__(self, logs: dict[tuple[str, int], list[bytes]]) -> None:
        self.logs = logs
        self.watched: list[Any] = []  # the reader's partitions, once it opened this consumer
        self.queued: list[int] = []  # at each call: the longest queue the reader holds
        self.position = dict.fromkeys(logs, 0)
        self.paused: set[tuple[str, int]] = set()
        self.seeks: list[tuple[tuple[str, int], int]] = []
        self.eof_sent: set[tuple[str, int]] = set()
        self.arriving: list[tuple[tuple[str, int], bytes]] = []
        self.waits: list[float] = []  # the timeouts of calls that found nothing
        self.held = 0.0  # seconds records that had arrived were held back by a call
        self.handed = 0  # records handed out (end-of-partition events not counted)

    # -- what opening a reader asks: metadata, watermarks, an assignment -------------------

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        from types import SimpleNamespace

        parts = {p: SimpleNamespace(id=p) for t, p in self.logs if t == topic}
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions=parts, error=None)})

    def get_watermark_offsets(self, tp: Any, timeout: float = -1, cached: bool = False) -> tuple[int, int]:
        return 0, len(self.logs[(tp.topic, tp.partition)])

    def assign(self, tps: list[Any]) -> None:
        for tp in tps:
            self.position[(tp.topic, tp.partition)] = tp.offset

    def close(self) -> None:
        pass

    def _ready(self, num_messages: int) -> list[Record]:
        out: list[Record] = []
        for tp, values in self.logs.items():
            if tp in self.paused:
                continue
            while len(out) < num_messages and self.position[tp] < len(values):
                offset = self.position[tp]
                out.append(Record(*tp, offset, values[offset]))
                self.handed += 1
                self.position[tp] = offset + 1
                self.eof_sent.discard(tp)
            if len(out) < num_messages and tp not in self.eof_sent:
                out.append(Record(*tp, self.position[tp], b"", eof=True))
                self.eof_sent.add(tp)
        return out

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        self.queued.append(max((len(p.queue) for p in self.watched), default=0))
        out = self._ready(num_messages)
        if len(out) < num_messages and timeout > 0:
            # What arrives during the wait is returned once the call is full or timed out.
            if self.arriving:
                for tp, value in self.arriving:
                    self.logs[tp].append(value)
                self.arriving = []
                out += self._ready(num_messages - len(out))
                if len(out) < num_messages:
                    self.held += timeout
            else:
                self.waits.append(timeout)
        return out

    def pause(self, tps: list[Any]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def resume(self, tps: list[Any]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}

    def seek(self, tp: Any) -> None:
        self.seeks.append(((tp.topic, tp.partition), tp.offset))
        self.position[(tp.topic, tp.partition)] = tp.offset
        self.eof_sent.discard((tp.topic, tp.partition))


def _doc(partition: int, offset: int, tokens: int = 3) -> bytes:
    return make_document(np.full(tokens, 100 * partition + offset + 1), id=f"{partition}-{offset}",
                         vocab_size=65536).SerializeToString()


class StandInClients(KafkaClients):
    """The clients a reader is built with, whose consumer is ``client`` (typed, as every
    consumer KafkaClients builds)."""

    def __init__(self, client: Consumer) -> None:
        super().__init__(ConnectionSettings())
        self.client = client

    def consumer(self, extra: Any = None, *, stage: str | None = None) -> TypedConsumer:
        return TypedConsumer(self.client)


def _reader(consumer: Consumer, end: int | None, cap: int = CAP, **options: Any) -> ShardReader:
    settings = LoaderSettings(topics=("t",), seq_len=8, eos_id=0, queue_records=cap, consume_batch=1000,
                              end=None if end is None else "latest", **options)
    reader = kafka_reader(settings, index=0, count=1, clients=StandInClients(consumer))
    reader.load_plan({f"t:{p}": {"next": 0, "end": end, "delivered": [], "partial": {}}
                      for _, p in consumer.logs})
    reader.open()
    consumer.watched = reader.parts
    return reader


def _source(reader: ShardReader) -> KafkaSource:
    assert isinstance(reader.source, KafkaSource)
    return reader.source


def _in_turn(records: int) -> list[tuple[str, int]]:
    """Every record once, the partitions in turn: what a bounded read of both partitions yields."""
    return [(f"t:{p}", o) for o in range(records) for p in (0, 1)]


IN_TURN = _in_turn(RECORDS)


def _take_all(reader: ShardReader) -> list[tuple[str, int]]:
    """Take (and deliver) records until the reader is used up; each payload must be its record's."""
    taken: list[tuple[str, int]] = []
    while (item := reader.next()) is not None:
        ref, payload, _ = item
        assert int(payload[0]) == 100 * int(ref[0][-1]) + ref[1] + 1
        taken.append(ref)
        reader.delivered(ref)
    return taken


class Overfull(Consumer):
    """A consume() that brings more than asked, as one would whose pause came too late: each
    call hands out every record not paused."""

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        return super().consume(10**9, timeout)


@pytest.mark.parametrize("kind", [Consumer, Overfull])
def test_a_partition_never_holds_more_than_its_cap_and_nothing_is_lost_or_read_twice(
        kind: type[Consumer]) -> None:
    consumer = kind({("t", p): [_doc(p, o) for o in range(RECORDS)] for p in (0, 1)})
    reader = _reader(consumer, end=RECORDS)
    taken = _take_all(reader)
    # What the queues held at each consume() call: what the calls before it left there.
    assert max(consumer.queued) == CAP
    if kind is Consumer:
        # Each call asks for no more than the least room below the cap: nothing is dropped,
        # so every record was fetched once.
        assert consumer.handed == 2 * RECORDS
    else:
        # Calls brought a whole partition's rest at once: the reader kept CAP of it and read
        # the rest again from the first record it dropped.
        assert (("t", 0), CAP) in consumer.seeks
    # Round-robin over the partitions, every record once; the state as if nothing was dropped.
    assert taken == IN_TURN
    assert reader.state()["partitions"] == {
        f"t:{p}": {"next": RECORDS, "read": RECORDS, "end": RECORDS, "delivered": []} for p in (0, 1)}


def test_a_live_reader_hands_a_fresh_record_on_as_it_arrives() -> None:
    consumer = Consumer({("t", 0): [_doc(0, 0)]})
    reader = _reader(consumer, end=None)
    first = reader.next(0.5)
    assert first is not None and first[0] == ("t:0", 0)
    # Caught up: the next record arrives while the reader waits, and is returned by that
    # wait; a call asking for a whole batch would have held it until its timeout.
    consumer.arriving.append((("t", 0), _doc(0, 1)))
    second = reader.next(0.5)
    assert second is not None and second[0] == ("t:0", 1)
    assert consumer.held == 0.0
    # Nothing comes: the wait lasts at least what was asked, in librdkafka's whole
    # milliseconds (rounded down, it ended early and the caller spun until its deadline).
    assert reader.next(0.0025) is None
    assert consumer.waits[-1] == 0.003


class IdleFetcher(Consumer):
    """librdkafka's fetcher as read in its source and measured: once every partition is
    paused it idles, and a resume does not wake it (it looks again on its own, up to a second
    later: here, after ``LOOKS_AFTER`` empty calls); a seek does, as it moves a partition to
    fetching. ``slept`` counts the calls that found a resumed partition not fetched yet."""

    LOOKS_AFTER = 3

    def __init__(self, logs: dict[tuple[str, int], list[bytes]]) -> None:
        super().__init__(logs)
        self.idle = False
        self.slept = 0
        self._empty = 0

    def _look(self) -> None:
        self.idle = self.paused == set(self.logs)
        self._empty = 0

    def pause(self, tps: list[Any]) -> None:
        super().pause(tps)
        if self.paused == set(self.logs):
            self.idle = True

    def seek(self, tp: Any) -> None:
        super().seek(tp)
        self._look()

    def _ready(self, num_messages: int) -> list[Record]:
        if self.idle:
            self.slept += self.paused != set(self.logs)
            self._empty += 1
            if self._empty >= self.LOOKS_AFTER:
                self._look()
            return []
        return super()._ready(num_messages)


def test_a_partition_resumed_while_the_fetcher_idles_is_fetched_at_once() -> None:
    consumer = IdleFetcher({("t", p): [_doc(p, o) for o in range(RECORDS)] for p in (0, 1)})
    reader = _reader(consumer, end=RECORDS)
    taken = _take_all(reader)
    # Both partitions reach their cap and are paused, then resumed as they empty; each
    # resume comes with a seek to where the partition's fetching goes on, which wakes the
    # fetcher, and moves nothing: every record once, in order.
    assert consumer.slept == 0
    assert taken == IN_TURN


def test_only_a_bounded_reader_cuts_the_brokers_long_poll_short() -> None:
    # A bounded run ends at offsets it knows: a fetch held at the end of a log for new data
    # (500 ms by default) would only hold back the fetch of a partition resumed meanwhile.
    def wait_ms(**options: Any) -> Any:
        settings = LoaderSettings(topics=("t",), seq_len=8, eos_id=0, **options)
        return KafkaSource(settings, index=0, count=1).consumer_config().get("fetch.wait.max.ms")

    assert wait_ms(end="latest") == BOUNDED_FETCH_WAIT_MS
    assert wait_ms(end=None) is None  # live: the long poll hands a fresh record on as it lands
    assert wait_ms(end="latest", consumer_config={"fetch.wait.max.ms": 200}) == 200  # the user's wins


def test_a_caught_up_partition_near_its_cap_does_not_shrink_the_others_pulls() -> None:
    # Partition 0 holds all it has, one short of the cap, and is caught up; partition 1 has
    # much more. Its records come at whole calls, not one room's worth (1) at a time.
    consumer = Consumer({("t", 0): [_doc(0, o) for o in range(CAP - 1)],
                         ("t", 1): [_doc(1, o) for o in range(RECORDS)]})
    reader = _reader(consumer, end=None)
    asked: list[int] = []
    consume = consumer.consume

    def consume_and_count(num_messages: int, timeout: float) -> list[Record]:
        asked.append(num_messages)
        return consume(num_messages, timeout)

    consumer.consume = consume_and_count  # type: ignore[method-assign]
    _source(reader).fill(0)  # partition 0's records and its end-of-partition event
    assert len(reader.parts[0].queue) == CAP - 1 and reader.parts[0].eof
    asked.clear()
    _source(reader).fill(0)
    assert asked and min(asked) > 1


class Repeating(Consumer):
    """A consumer whose fetch of partition 0 goes back ``back`` records once, after records
    ``0 .. at``, so records still queued come twice in one call, as librdkafka's do after a
    seek below what it had fetched."""

    def __init__(self, logs: dict[tuple[str, int], list[bytes]], *, at: int, back: int) -> None:
        super().__init__(logs)
        self.at, self.back = at, back
        self.seen: list[int] = []  # partition 0's offsets as handed out

    def _ready(self, num_messages: int) -> list[Record]:
        if self.back and num_messages > self.at + 1:
            out = super()._ready(self.at + 1)  # partition 0 comes first: 0 .. at
            self.position[("t", 0)] -= self.back
            self.back = 0
            out += super()._ready(num_messages - len(out))
        else:
            out = super()._ready(num_messages)
        self.seen += [r.offset() for r in out if r.partition() == 0 and r.error() is None]
        return out


def test_records_handed_out_twice_change_neither_the_order_nor_what_is_taken() -> None:
    # Copies of queued records are dropped as they come. Taken (and skipped) at their turn
    # instead, each copy gave partition 0's turn away: the same records, in another order,
    # so the shuffle buffer and the batches differed from another run's.
    consumer = Repeating({("t", p): [_doc(p, o) for o in range(RECORDS)] for p in (0, 1)}, at=5, back=3)
    reader = _reader(consumer, end=RECORDS)
    taken = _take_all(reader)
    assert len(consumer.seen) - len(set(consumer.seen)) >= 3  # some came twice
    assert taken == IN_TURN


def test_a_check_between_two_takes_fetches_no_record_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # With a look at the queues at every take, partitions are resumed (and sought to where
    # their fetching goes on) right as records are taken. Looked at after a record left its
    # queue but before the reader counted it read, an emptied partition was sought back to
    # that record, fetched it again, and the copy took a turn: another order under load.
    monkeypatch.setattr(KafkaSource, "check_s", 0.0)
    consumer = Consumer({("t", p): [_doc(p, o) for o in range(RECORDS)] for p in (0, 1)})
    reader = _reader(consumer, end=RECORDS, cap=1)  # each take empties its partition's queue
    taken = _take_all(reader)
    assert taken == IN_TURN
    assert consumer.handed == 2 * RECORDS


class PausedWaits(Consumer):
    """Counts the calls that waited while every partition was paused: nothing can come."""

    def __init__(self, logs: dict[tuple[str, int], list[bytes]]) -> None:
        super().__init__(logs)
        self.paused_waits = 0

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        self.paused_waits += timeout > 0 and self.paused == set(self.logs)
        return super().consume(num_messages, timeout)


def test_a_refill_stops_once_every_partition_is_at_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # A refill pulls until the queues hold the target in bytes (here about 3 MiB). Caps of
    # about 2 MiB together stop it first: every partition paused at its cap, and a pull
    # after that waited out the refill's deadline (50 ms) for records none could bring.
    monkeypatch.setattr(KafkaSource, "check_s", 0.0)
    records = 2000
    consumer = PausedWaits({("t", p): [_doc(p, o, tokens=400) for o in range(records)] for p in (0, 1)})
    cap = 2 * 1024 * 1024 // (2 * len(consumer.logs[("t", 0)][0]))
    reader = _reader(consumer, end=records, cap=cap, read_ahead_bytes=4 * 1024 * 1024)
    taken = _take_all(reader)
    assert taken == _in_turn(records)
    assert consumer.paused_waits == 0
    assert not _source(reader).read_ahead.held_by_caps(cap, 2)  # the caps can reach the refill half


def test_a_reader_held_by_its_caps_is_resumed_without_a_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # Caps of a few hundred bytes under a target of megabytes: the reader never leaves the
    # refill half of the target, so its partitions stay resumed whatever a refill brings,
    # and waiting for one only idled the caller (a mixture's batches, one reader per source).
    monkeypatch.setattr(KafkaSource, "check_s", 0.0)
    consumer = Consumer({("t", p): [_doc(p, o) for o in range(RECORDS)] for p in (0, 1)})
    reader = _reader(consumer, end=RECORDS)
    fetcher = _source(reader).fetcher
    hold, pull = fetcher.hold, fetcher.pull
    holding = [False]
    waited: list[float] = []

    def hold_and_look() -> None:
        holding[0] = True
        try:
            hold()
        finally:
            holding[0] = False

    def pull_and_look(timeout: float) -> tuple[int, bool]:
        if holding[0] and timeout > 0:
            waited.append(timeout)
        return pull(timeout)

    monkeypatch.setattr(fetcher, "hold", hold_and_look)
    monkeypatch.setattr(fetcher, "pull", pull_and_look)
    assert _take_all(reader) == IN_TURN
    assert consumer.seeks  # partitions were paused at their caps and resumed
    assert waited == []
    assert _source(reader).read_ahead.held_by_caps(CAP, 2)


def test_queued_records_give_the_cyclic_collector_nothing_to_track() -> None:
    """A librdkafka Message is tracked by the collector, and thousands waiting in the queues
    were promoted into its oldest generation: a full collection of the whole process per ~100M
    tokens read. The queues hold tuples of plain values, which a collection untracks."""
    consumer = Consumer({("t", p): [_doc(p, o) for o in range(RECORDS)] for p in (0, 1)})
    reader = _reader(consumer, end=RECORDS)
    assert reader.next() is not None
    queued = [entry for part in reader.parts for entry in part.queue]
    assert len(queued) >= CAP
    gc.collect()
    assert [entry for entry in queued if gc.is_tracked(entry)] == []


def test_the_first_record_waits_for_one_batch_not_for_all_librdkafka_holds() -> None:
    # librdkafka fetches faster than the reader moves its records, so a fetch that pulls while
    # a call comes back full went on, before the first batch, for the whole topic (25,000
    # records of a 61 MB one where the batch needed 2,000). At the start a fetch brings one
    # batch (the first call, before any record was seen, asks for 16), and the look right
    # after it moves nothing more.
    records = 5000
    consumer = Consumer({("t", p): [_doc(p, o) for o in range(records)] for p in range(4)})
    reader = _reader(consumer, end=records, cap=records)
    first = reader.next()
    assert first is not None and first[0] == ("t:0", 0)
    assert consumer.handed == 16 + 1000  # consume_batch
    # The rest comes as the takes need it, every record once and in turn.
    taken = [first[0]]
    reader.delivered(first[0])
    taken += _take_all(reader)
    assert taken == [(f"t:{p}", o) for o in range(records) for p in range(4)]
    assert consumer.handed == 4 * records


def test_past_the_start_a_look_pulls_to_the_target_again() -> None:
    # The start ends once the queues took in the floor's worth (read_ahead_bytes / 16); from
    # then on a fetch pulls while librdkafka has records and the queues are below the target,
    # as the steady state's CPU per token needs (kafeed.loader.sources.kafka_fetch.fetch).
    records = 2000
    consumer = Consumer({("t", p): [_doc(p, o, tokens=400) for o in range(records)] for p in (0, 1)})
    reader = _reader(consumer, end=records, cap=records, read_ahead_bytes=4 * 1024 * 1024)
    ahead = _source(reader).read_ahead
    first = reader.next()
    assert first is not None
    # The first fetch brought one batch (16 + 1000 records of about 835 bytes), past the floor
    # (256 KiB): the look that follows pulled on to the target (3 MiB).
    assert not ahead.starting
    assert consumer.handed > 16 + 1000 and ahead.held >= ahead.target
    reader.delivered(first[0])
    assert [first[0], *_take_all(reader)] == _in_turn(records)


class Asked(Consumer):
    """Records the requests a reader makes while it opens."""

    def __init__(self, logs: dict[tuple[str, int], list[bytes]]) -> None:
        super().__init__(logs)
        self.asked: list[tuple[str, Any]] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.asked.append(("metadata", topic))
        return super().list_topics(topic, timeout)

    def get_watermark_offsets(self, tp: Any, timeout: float = -1, cached: bool = False) -> tuple[int, int]:
        self.asked.append(("watermarks", (tp.topic, tp.partition)))
        return super().get_watermark_offsets(tp, timeout, cached)


def test_a_fresh_reader_asks_each_partition_once() -> None:
    # The start and the end (end="latest") are read from one request per partition, not two.
    consumer = Asked({("t", p): [_doc(p, o) for o in range(RECORDS)] for p in range(3)})
    settings = LoaderSettings(topics=("t",), seq_len=8, eos_id=0, end="latest")
    reader = kafka_reader(settings, index=0, count=1, clients=StandInClients(consumer))
    reader.open()
    assert consumer.asked == [("metadata", "t"), ("watermarks", ("t", 0)),
                              ("watermarks", ("t", 1)), ("watermarks", ("t", 2))]
    assert reader.state()["partitions"]["t:2"]["end"] == RECORDS


class NoTopic(Asked):
    """A cluster without the topic: its partition's watermarks fail as librdkafka's do."""

    def get_watermark_offsets(self, tp: Any, timeout: float = -1, cached: bool = False) -> tuple[int, int]:
        from confluent_kafka import KafkaException

        self.asked.append(("watermarks", (tp.topic, tp.partition)))
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))


def test_a_missing_topic_is_told_by_the_listing() -> None:
    consumer = NoTopic({("other", 0): []})
    settings = LoaderSettings(topics=("t",), seq_len=8, eos_id=0)
    reader = kafka_reader(settings, index=0, count=1, clients=StandInClients(consumer))
    with pytest.raises(TopicError, match="'t' does not exist"):
        reader.open()
    assert consumer.asked == [("metadata", "t")]
