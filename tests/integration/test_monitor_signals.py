"""Disk through LogDirsCommand and the producer error rate from a stage's metrics endpoint."""

from __future__ import annotations

import contextlib
import os

import pytest
from confluent_kafka import Producer

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.monitor.alerts import AlertEngine, AlertSettings
from kafeed.monitor.rules import conditions
from kafeed.monitor.watch import ClusterMonitor, MonitorOptions
from kafeed.telemetry import metrics as m
from tests.kafka_fixtures import TopicFactory


def test_remote_disk_usage_through_log_dirs_command(kafka: ConnectionSettings,
                                                    make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    producer = Producer(kafka.client_config())
    for _ in range(200):
        producer.produce(topic, value=os.urandom(500))  # incompressible: the topic uses zstd
    assert producer.flush(30) == 0
    with ClusterMonitor(kafka) as monitor:  # no data dir: ask the brokers
        snap = monitor.poll()
    assert [d.broker for d in snap.disk] == [1]
    disk = snap.disk[0]
    assert disk.used_bytes >= 200 * 500
    # the test broker's log dir is on this host, so its filesystem is measurable too
    assert disk.free_bytes is not None and disk.used_ratio is not None and 0 < disk.used_ratio < 1


def test_producer_error_rate_from_scraped_stage(kafka: ConnectionSettings) -> None:
    port = m.serve_metrics(0)  # stands in for `kafeed ingest --metrics-port`
    with contextlib.ExitStack() as stack:
        stack.callback(m.stop_metrics_servers)
        options = MonitorOptions(scrape=[f"http://127.0.0.1:{port}/metrics"], groups=[])
        monitor = ClusterMonitor(kafka, options=options)
        stack.callback(monitor.close)
        settings = AlertSettings(max_producer_error_rate=5.0)
        engine = AlertEngine(settings)
        first = monitor.poll()
        assert first.producer_error_rate is None  # a rate needs two readings
        m.PRODUCE_ERRORS.labels(stage="ingest").inc(1000)
        second = monitor.poll()
        assert second.producer_error_rate is not None and second.producer_error_rate > 5.0
        events = engine.evaluate(conditions(second, settings))
        assert [(e.rule, e.status) for e in events] == [("producer_errors", "firing")]
        third = monitor.poll()
        assert third.producer_error_rate == 0.0
        events = engine.evaluate(conditions(third, settings))
        assert [(e.rule, e.status) for e in events] == [("producer_errors", "resolved")]


def test_once_prints_the_dashboard(kafka: ConnectionSettings, make_topic: TopicFactory,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(partitions=1)
    assert main(["monitor", "-b", kafka.bootstrap, "--once", "--group", "none-such"]) == 0
    text = capsys.readouterr().out
    assert "brokers 1/1 up" in text and "controller" in text and topic[:10] in text
