"""Disk through LogDirsCommand and the producer error rate from a stage's metrics endpoint."""

from __future__ import annotations

import os

from confluent_kafka import Producer

from kafeed.config import ConnectionSettings
from kafeed.monitor import metrics as m
from kafeed.monitor.alerts import AlertEngine, AlertSettings
from kafeed.monitor.rules import conditions
from kafeed.monitor.watch import ClusterMonitor, MonitorOptions
from tests.kafka_fixtures import TopicFactory


def test_remote_disk_usage_through_log_dirs_command(kafka: ConnectionSettings,
                                                    make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    producer = Producer(kafka.client_config())
    for _ in range(200):
        producer.produce(topic, value=os.urandom(500))  # incompressible: the topic uses zstd
    assert producer.flush(30) == 0
    snap = ClusterMonitor(kafka).poll()  # no data dir: ask the brokers
    assert [d.broker for d in snap.disk] == [1]
    disk = snap.disk[0]
    assert disk.used_bytes >= 200 * 500
    # the test broker's log dir is on this host, so its filesystem is measurable too
    assert disk.free_bytes is not None and disk.used_ratio is not None and 0 < disk.used_ratio < 1


def test_producer_error_rate_from_scraped_stage(kafka: ConnectionSettings) -> None:
    port = m.serve_metrics(0)  # stands in for `kafeed ingest --metrics-port`
    try:
        options = MonitorOptions(scrape=[f"http://127.0.0.1:{port}/metrics"], groups=[])
        monitor = ClusterMonitor(kafka, options=options)
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
    finally:
        m.stop_metrics_servers()
