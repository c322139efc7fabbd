"""TransactionalProducer without a broker: a send_offsets_to_transaction that never returns (what
librdkafka does after a broker restart made it drop its group coordinator) is given up and the
client rebuilt; one that returns or fails is not."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

import kafeed.kafka.producer as producer_module
from kafeed.config import ConnectionSettings
from kafeed.errors import BrokerUnavailable, KafkaOperationError
from kafeed.kafka import is_fatal
from kafeed.kafka.producer import TransactionalProducer


class Client:
    """librdkafka's Producer for the transactional calls; ``send_offsets`` decides what the
    offsets call does: "ok", "stuck" (blocks until the test ends), or an exception to raise."""

    def __init__(self, send_offsets: str | Exception, release: threading.Event) -> None:
        self.send_offsets = send_offsets
        self.release = release
        self.calls: list[str] = []

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def send_offsets_to_transaction(self, tps: list[Any], metadata: Any, timeout: float) -> None:
        self.calls.append("send_offsets")
        if self.send_offsets == "stuck":
            self.release.wait()
        elif isinstance(self.send_offsets, Exception):
            raise self.send_offsets

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")


class Producer(TransactionalProducer):
    """Each client built takes the next behaviour of ``plan``; every client is kept."""

    def __init__(self, plan: list[str | Exception], release: threading.Event, timeout_s: float) -> None:
        self.plan = plan
        self.release = release
        self.clients: list[Client] = []
        super().__init__(ConnectionSettings(bootstrap="localhost:9"), transactional_id="t",
                         stage="test", timeout_s=timeout_s)

    def _client(self) -> Client:
        client = Client(self.plan.pop(0), self.release)
        self.clients.append(client)
        return client


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # lets a stuck call's thread end


def test_a_stuck_send_offsets_is_given_up_and_the_client_rebuilt(
        release: threading.Event, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(producer_module, "STUCK_AFTER_S", 0.2)
    p = Producer(["stuck", "ok"], release, timeout_s=0.3)
    p.init()
    p.begin()
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable) as caught:  # librdkafka's _TIMED_OUT, translated
        p.send_offsets({("in", 0): 5}, "group-metadata")
    waited = time.monotonic() - started
    assert 0.5 <= waited < 3, waited
    assert is_fatal(caught.value) and caught.value.code == KafkaError._TIMED_OUT
    assert "did not return within 0.5 s" in caught.value.message

    assert p.recover(caught.value) is True and p.rebuilds == 1
    stuck, fresh = p.clients
    assert stuck.calls == ["init", "begin", "send_offsets"]  # the stuck client is not called again
    assert fresh.calls == ["init"]  # its init fences the stuck one and aborts that transaction
    p.begin()
    p.send_offsets({("in", 0): 5}, "group-metadata")
    p.commit()
    assert fresh.calls == ["init", "begin", "send_offsets", "commit"]


def test_send_offsets_that_returns_or_fails_is_not_given_up(release: threading.Event) -> None:
    retriable = KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, "loading", retriable=True))
    abortable = KafkaException(KafkaError(KafkaError._STATE, "abort", txn_requires_abort=True))
    p = Producer(["ok"], release, timeout_s=60)
    p.begin()
    p.clients[0].send_offsets = retriable
    with pytest.raises(KafkaOperationError) as caught:  # retried with the same client, then raised
        p.send_offsets({("in", 0): 5}, "group-metadata")
    assert caught.value.__cause__ is retriable
    assert caught.value.code == KafkaError.COORDINATOR_LOAD_IN_PROGRESS
    assert p.clients[0].calls.count("send_offsets") == producer_module.MAX_ATTEMPTS

    p.clients[0].send_offsets = abortable
    with pytest.raises(KafkaOperationError) as caught:
        p.send_offsets({("in", 0): 5}, "group-metadata")
    assert caught.value.__cause__ is abortable and not is_fatal(caught.value)
    assert p.recover(caught.value) is False and len(p.clients) == 1 and p.clients[0].calls[-1] == "abort"

    p.clients[0].send_offsets = "ok"
    p.begin()
    p.send_offsets({("in", 0): 5}, "group-metadata")
    p.commit()
    assert p.rebuilds == 0 and p.clients[0].calls[-2:] == ["send_offsets", "commit"]
