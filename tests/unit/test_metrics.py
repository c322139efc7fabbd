"""kafeed metrics: librdkafka statistics parsing, the recorder, the HTTP endpoint."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from kafeed.telemetry import metrics as m
from kafeed.telemetry.recorder import MetricsRecorder, snapshot
from kafeed.telemetry.stats import librdkafka_stats_callback

DATA = Path(__file__).parent / "data"


def value(name: str, **labels: str) -> float | None:
    return m.REGISTRY.get_sample_value(name, labels)


def test_producer_stats_feed_network_and_rtt() -> None:
    doc = json.loads((DATA / "librdkafka_producer_stats.json").read_text())
    cb = librdkafka_stats_callback("ingest-test")
    cb(json.dumps(doc))
    client = doc["name"]
    assert value("kafeed_client_tx_bytes_total", stage="ingest-test", client=client) == doc["tx_bytes"]
    assert value("kafeed_client_tx_messages_total", stage="ingest-test", client=client) == doc["txmsgs"]
    broker = next(b for b in doc["brokers"].values() if b["nodeid"] >= 0)
    label = f"{broker['nodeid']}:{broker['name'].rsplit('/', 1)[0]}"
    p99 = value("kafeed_broker_rtt_seconds", stage="ingest-test", broker=label, quantile="0.99")
    assert p99 is not None and p99 > 0
    assert p99 == pytest.approx(broker["rtt"]["p99"] / 1e6)
    # librdkafka reports totals: a second, larger report adds only the difference
    doc2 = {**doc, "tx_bytes": doc["tx_bytes"] + 1000}
    cb(doc2)
    assert value("kafeed_client_tx_bytes_total", stage="ingest-test", client=client) == doc["tx_bytes"] + 1000
    # a fresh client instance (totals reset) counts from zero again, never backwards
    cb({**doc, "tx_bytes": 10})
    assert value("kafeed_client_tx_bytes_total", stage="ingest-test", client=client) == doc["tx_bytes"] + 1010


def test_consumer_stats_feed_client_lag_skipping_internal_partition() -> None:
    doc = json.loads((DATA / "librdkafka_consumer_stats.json").read_text())
    librdkafka_stats_callback("loader-test")(json.dumps(doc))
    assert value("kafeed_client_rx_messages_total", stage="loader-test", client=doc["name"]) == doc["rxmsgs"]
    topic, tdoc = next(iter(doc["topics"].items()))
    for part, pdoc in tdoc["partitions"].items():
        got = value("kafeed_client_consumer_lag", stage="loader-test", topic=topic, partition=part)
        if int(part) < 0:
            assert got is None
        else:
            assert got == pdoc["consumer_lag"]


def test_malformed_stats_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    cb = librdkafka_stats_callback("bad")
    with caplog.at_level("WARNING", logger="kafeed"):
        cb("{not json")
        cb(json.dumps({"name": "x", "tx_bytes": "many"}))  # no exception escapes
    skipped = [r for r in caplog.records if "malformed librdkafka statistics" in r.getMessage()]
    assert len(skipped) == 2
    assert value("kafeed_client_tx_bytes_total", stage="bad", client="x") is None
    cb(json.dumps({"name": "x", "tx_bytes": 10}))  # the callback keeps working after bad input
    assert value("kafeed_client_tx_bytes_total", stage="bad", client="x") == 10


def test_recorder_appends_json_lines(tmp_path: Path) -> None:
    m.TOKENS.labels(stage="recorder-test").inc(512)
    m.END_TO_END_LATENCY.labels(stage="recorder-test").observe(0.2)
    with MetricsRecorder(tmp_path, interval=60) as rec:
        rec.record(loss=2.5)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3  # start, explicit, close
    tokens = [s for s in lines[1]["metrics"]["kafeed_tokens_total"]
              if s["labels"]["stage"] == "recorder-test"]
    assert tokens == [{"labels": {"stage": "recorder-test"}, "value": 512.0}]
    assert lines[1]["extra"] == {"loss": 2.5}
    assert "kafeed_end_to_end_latency_seconds_count" in lines[1]["metrics"]
    assert not any(name.endswith("_bucket") for name in lines[1]["metrics"])


def test_snapshot_names_follow_conventions() -> None:
    m.RECORDS_IN.labels(stage="s", topic="t").inc()
    names = set(snapshot())
    assert "kafeed_records_in_total" in names
    assert all(n.startswith("kafeed_") for n in names)


def test_serve_metrics_on_loopback() -> None:
    m.BATCHES.labels(stage="serve-test").inc(3)
    port = m.serve_metrics(0)
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        m.stop_metrics_servers()
    assert 'kafeed_batches_total{stage="serve-test"} 3.0' in text


@pytest.mark.parametrize("copies", [1, 20])  # 7 values: plain Python; 140: numpy
def test_batch_latency_matches_per_record_observe(copies: int) -> None:
    import numpy as np

    now = 1_700_000_100.0
    ages = (0.001, 0.05, 0.3, 0.3, 7.0, 4000.0, 99999.0) * copies
    ts_ms = np.array([now * 1000 - d * 1000 for d in ages])
    m.observe_latencies(f"lat-batch-{copies}", ts_ms, now=now)
    ref = m.END_TO_END_LATENCY.labels(stage=f"lat-ref-{copies}")
    for d in ages:
        ref.observe(d)
    for le in ("0.005", "0.05", "0.25", "0.5", "10.0", "3600.0", "14400.0", "+Inf"):
        got = value("kafeed_end_to_end_latency_seconds_bucket", stage=f"lat-batch-{copies}", le=le)
        want = value("kafeed_end_to_end_latency_seconds_bucket", stage=f"lat-ref-{copies}", le=le)
        assert got == want, le
    assert value("kafeed_end_to_end_latency_seconds_count", stage=f"lat-batch-{copies}") == len(ages)
    assert value("kafeed_end_to_end_latency_seconds_sum", stage=f"lat-batch-{copies}") == pytest.approx(
        value("kafeed_end_to_end_latency_seconds_sum", stage=f"lat-ref-{copies}"), rel=1e-6)


def test_data_wait_counts_the_block() -> None:
    import time

    with m.data_wait("wait-test"):
        time.sleep(0.05)
    got = value("kafeed_data_wait_seconds_total", stage="wait-test")
    assert got is not None and 0.04 < got < 1.0


def test_metrics_port_in_use_is_a_config_error() -> None:
    from kafeed.cli.common import start_metrics
    from kafeed.errors import ConfigError

    port = m.serve_metrics(0)
    try:
        with pytest.raises(ConfigError, match=f"port {port}"):
            start_metrics(port)
        start_metrics(None)  # off by default: serves nothing, raises nothing
        assert len(m._servers) == 1
    finally:
        m.stop_metrics_servers()
