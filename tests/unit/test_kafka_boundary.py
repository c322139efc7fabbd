"""The Kafka boundary without a broker: client configs, the dead-letter schema, batch positions."""

from __future__ import annotations

import logging
import threading

import pytest

from kafeed.config import ConnectionSettings
from kafeed.kafka import RECORD_OVERHEAD, client_config, close_consumer, dead_letter_headers, fit_value
from kafeed.stream import Record, positions


def test_client_config_has_logger_stats_for_a_stage_and_extra_last() -> None:
    conn = ConnectionSettings(bootstrap="localhost:9092")
    plain = client_config(conn)
    assert plain["logger"] is logging.getLogger("kafeed.librdkafka")
    assert "stats_cb" not in plain
    staged = client_config(conn, {"statistics.interval.ms": 500, "acks": "all"}, stage="prepare")
    assert callable(staged["stats_cb"]) and staged["statistics.interval.ms"] == 500
    assert staged["acks"] == "all" and staged["bootstrap.servers"] == "localhost:9092"


def test_dead_letter_headers_follow_the_schema_in_order() -> None:
    headers = dead_letter_headers(kind="decode", reason="not protobuf ✗", stage="prepare",
                                  source=("raw", 2, 41), extra=[("kafeed.format", b"protobuf")])
    assert headers == [
        ("kafeed.error.kind", b"decode"), ("kafeed.error.reason", "not protobuf ✗".encode()),
        ("kafeed.error.stage", b"prepare"), ("kafeed.source.topic", b"raw"),
        ("kafeed.source.partition", b"2"), ("kafeed.source.offset", b"41"),
        ("kafeed.format", b"protobuf")]
    assert [k for k, _ in dead_letter_headers(kind="k", reason="r", stage="ingest")] == [
        "kafeed.error.kind", "kafeed.error.reason", "kafeed.error.stage"]


def test_fit_value_cuts_to_the_topic_limit_and_says_so() -> None:
    headers = dead_letter_headers(kind="k", reason="r", stage="s")
    assert fit_value(b"x" * 100, headers, 10_000) == b"x" * 100 and len(headers) == 3
    limit = RECORD_OVERHEAD + 1000
    room = limit - RECORD_OVERHEAD - sum(len(k) + len(v) for k, v in headers)
    cut = fit_value(b"y" * 5000, headers, limit)
    assert cut == b"y" * room
    assert headers[-1] == ("kafeed.error.truncated", b"5000")
    assert fit_value(None, [], 10) is None


def test_positions_are_last_offset_plus_one_per_partition() -> None:
    records = [Record("raw", p, o, None, b"") for p, o in [(0, 5), (1, 3), (0, 16), (0, 9)]]
    assert positions(records) == {("raw", 0): 17, ("raw", 1): 4}


def test_undelivered_records_become_one_sentence_naming_the_cause() -> None:
    from confluent_kafka import KafkaError

    from kafeed.errors import KafkaOperationError
    from kafeed.kafka import DeliveryFailure, undelivered_error

    timed_out = [DeliveryFailure("raw", KafkaError._MSG_TIMED_OUT, "Local: Message timed out")] * 3
    err = undelivered_error(timed_out, 0, timeout_s=55, unreachable=["node 1 (127.0.0.1:9092)"], hint="h")
    assert isinstance(err, KafkaOperationError) and err.code == KafkaError._MSG_TIMED_OUT
    assert err.message == ("3 record(s) to 'raw' were not acknowledged, so the transaction was aborted: "
                           "no broker acknowledged them within 55 s; broker node 1 (127.0.0.1:9092) "
                           "unreachable.")
    assert err.hint == "h"
    storage = [DeliveryFailure("raw", KafkaError.KAFKA_STORAGE_ERROR, "Broker: Disk error")]
    assert "could not write them to its log dir (a full or failing disk)" in str(
        undelivered_error(storage, 2, timeout_s=55))
    isr = [DeliveryFailure("tokens", KafkaError.NOT_ENOUGH_REPLICAS, "Broker: Not enough in-sync replicas")]
    assert "min.insync.replicas" in undelivered_error(isr, 0, timeout_s=55).message
    # A flush that gave up with nothing reported: still a count and a cause, no topic to name.
    assert undelivered_error([], 7, timeout_s=30).message == (
        "7 record(s) were not acknowledged, so the transaction was aborted: no broker acknowledged "
        "them within 30 s.")


class _Closing:
    """A client whose close() waits for ``release`` (librdkafka's never-ending close), or raises."""

    def __init__(self, *, error: Exception | None = None) -> None:
        self.release = threading.Event()
        self.closed = threading.Event()
        self.error = error

    def close(self) -> None:
        if self.error is not None:
            raise self.error
        self.release.wait()
        self.closed.set()


def test_a_close_that_does_not_finish_is_left_behind_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    stuck = _Closing()
    with caplog.at_level(logging.WARNING, logger="kafeed"):
        assert close_consumer(stuck, 0.2, what="route consumer") is False
    assert "route consumer close did not finish within 0.2 s" in caplog.text
    stuck.release.set()  # it goes on by itself: nothing waited on it
    assert stuck.closed.wait(10)


def test_a_close_that_finishes_or_fails_returns_at_once(caplog: pytest.LogCaptureFixture) -> None:
    done = _Closing()
    done.release.set()
    assert close_consumer(done, 60) is True and done.closed.is_set()
    with caplog.at_level(logging.DEBUG, logger="kafeed"):
        assert close_consumer(_Closing(error=RuntimeError("broker gone")), 60) is True
        assert close_consumer(_Closing(error=RuntimeError("gone again")), 60,
                              failure_level=logging.WARNING) is True
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels["consumer close failed: broker gone"] == logging.DEBUG
    assert levels["consumer close failed: gone again"] == logging.WARNING
