"""Abort-and-rewind and producer rebuild against the real broker, with one injected client error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafeed.config import ConnectionSettings
from kafeed.kafka.translate import translate_kafka_error
from kafeed.prepare import PrepareProcessor, PrepareSettings
from kafeed.schema import decode_document
from kafeed.stream import BatchResult, Record
from tests.prepare_support import document_ids, paragraphs, produce, read_topic, sample_record


class FailOnce(PrepareProcessor):
    """Fails the second batch's transaction after its records were produced (transaction open)."""

    def __init__(self, *args: Any, error: KafkaError, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.error = error
        self.sent = 0

    def _send(self, records: Sequence[Record], result: BatchResult, metadata: Any) -> None:
        self.sent += 1
        if self.sent == 2:
            p = self.producer
            assert p is not None
            p.begin()
            for doc in result.outputs:
                p.produce(doc.topic, doc.value, doc.key)
            p.flush(10)  # really on the broker, inside the transaction that is about to fail
            failed = KafkaException(self.error)  # as the producer raises it: translated
            raise translate_kafka_error(failed, action="commit the transaction") from failed
        super()._send(records, result, metadata)


@pytest.mark.parametrize("kind", ["abortable", "fatal"])
def test_failed_transaction_is_rewound(kafka: ConnectionSettings, make_topic, kind: str) -> None:  # type: ignore[no-untyped-def]
    raw = make_topic(partitions=2)
    good = paragraphs(300)
    records = [sample_record(t) for t in good] + [sample_record(t) for t in good[:30]]
    produce(kafka, raw, records)
    settings = PrepareSettings(input=raw, output=f"{raw}.tokens", group=f"g-{raw}", idle_s=1.0,
                               tokenizer={"name": "minilm"},  # type: ignore[arg-type]
                               kafka={"batch_size": 40})  # type: ignore[arg-type]
    error = (KafkaError(KafkaError._FENCED, "injected", fatal=True) if kind == "fatal"
             else KafkaError(KafkaError._STATE, "injected", txn_requires_abort=True))
    stats = FailOnce(settings, kafka, error=error).run(until_caught_up=True)
    assert stats.aborted_batches == 1
    assert stats.producer_rebuilds == (1 if kind == "fatal" else 0)
    assert stats.balanced and stats.records_in == len(records)
    assert (stats.documents_out, stats.duplicates) == (300, 30)
    out = read_topic(kafka, settings.output)
    ids = document_ids(out)
    assert len(ids) == len(set(ids)) == 300       # the aborted copies are invisible to read_committed
    doc = decode_document(out[0].value())
    assert doc.tokenizer.startswith("minilm-wordpiece:") and doc.dtype == 1
