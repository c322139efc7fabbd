"""The fake cluster's producers: confluent-kafka's ``Producer`` in memory, transactions included."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafeed.kafka.fake.records import FakeMessage, Headers, Stored, Txn, kafka_exception
from kafeed.kafka.producer import TransactionalProducer

if TYPE_CHECKING:
    from kafeed.kafka.fake.cluster import FakeKafka


class FakeTransactionalProducer(TransactionalProducer):
    """The real transactional producer (retries, recovery) over a fake librdkafka producer."""

    def __init__(self, fake: FakeKafka, **kwargs: Any) -> None:
        self._fake = fake
        super().__init__(fake.connection, **kwargs)

    def _client(self) -> Any:
        return FakeProducer(self._fake, self._conf)


class FakeProducer:
    """Transactional when given ``transactional.id``: its records stay invisible to read_committed
    consumers until the transaction commits, and an abort hides them for good. Delivery
    callbacks run at once."""

    def __init__(self, fake: FakeKafka, conf: Mapping[str, Any]) -> None:
        self._fake = fake
        self._id: str | None = conf.get("transactional.id")
        self._on_delivery: Callable[..., Any] | None = conf.get("on_delivery")
        self._txn: Txn | None = None
        self._fenced = False

    def _live(self) -> None:
        if self._fenced:
            raise kafka_exception("_FENCED", "producer fenced by a newer instance", fatal=True)

    def fenced(self) -> None:
        self._fenced = True
        if self._txn is not None:
            self._end(self._txn, "aborted")

    def init_transactions(self, timeout: float = 0) -> None:
        self._fake.check("init_transactions")
        if self._id is None:
            raise kafka_exception("_NOT_CONFIGURED", "init_transactions needs transactional.id")
        with self._fake.changed:
            self._fake.fence(self._id, self)

    def begin_transaction(self) -> None:
        self._live()
        self._fake.check("begin_transaction")
        self._txn = Txn()

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                partition: int = -1, on_delivery: Callable[..., Any] | None = None, timestamp: int = 0,
                headers: Headers | None = None) -> None:
        self._live()
        self._fake.check("produce")
        with self._fake.changed:
            if self._id is not None and self._txn is None:
                raise kafka_exception("_STATE", "produce outside a transaction")
            p, offset = self._fake.append(topic, partition, key, value,
                                          list(headers) if headers else None, self._txn)
            self._fake.changed.notify_all()
        report = on_delivery or self._on_delivery
        if report is not None:
            report(None, FakeMessage(topic, p, offset, key, value, headers))

    def send_offsets_to_transaction(self, positions: Sequence[Any], group_metadata: Any,
                                    timeout: float = 0) -> None:
        self._live()
        self._fake.check("send_offsets_to_transaction")
        if self._txn is None:
            raise kafka_exception("_STATE", "send_offsets_to_transaction outside a transaction")
        self._txn.group = str(group_metadata)
        self._txn.offsets.update({(tp.topic, tp.partition): tp.offset for tp in positions})

    def commit_transaction(self, timeout: float = 0) -> None:
        self._live()
        self._fake.check("commit_transaction")
        if self._txn is None:
            raise kafka_exception("_STATE", "commit_transaction outside a transaction")
        self._end(self._txn, "committed")

    def abort_transaction(self, timeout: float = 0) -> None:
        self._live()
        self._fake.check("abort_transaction")
        if self._txn is not None:
            self._end(self._txn, "aborted")

    def _end(self, txn: Txn, state: str) -> None:
        """Settle ``txn``: a control marker (one offset) on every partition it wrote to."""
        with self._fake.changed:
            txn.state = state
            for parts in self._fake.topics.values():
                for log in parts:
                    if any(r.txn is txn for r in log):
                        log.append(Stored(len(log), None, None, None, 0, txn, marker=True))
            if state == "committed":
                self._fake.transactions.append(dict(txn.offsets))
                if txn.group is not None:
                    self._fake.groups.setdefault(txn.group, {}).update(txn.offsets)
            self._txn = None
            self._fake.changed.notify_all()

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return 0
