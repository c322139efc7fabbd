"""The loader's metrics bookkeeping without a broker: Delivered -> kafeed_* figures."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kafeed.loader.metrics import LoaderMetrics, batch_tokens
from kafeed.loader.nodes.delivered import Delivered
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.kafka_source import KafkaSource
from kafeed.telemetry import metrics as m
from kafeed.telemetry.stats import StatsCallback
from tests.stream_entries import stream_entry


def value(name: str, **labels: str) -> float:
    return m.REGISTRY.get_sample_value(name, labels) or 0.0


def test_batch_counts_records_per_topic_positions_and_skips_missing_timestamps() -> None:
    now_ms = 1_900_000_000_000
    lm = LoaderMetrics()
    batches0 = value("kafeed_batches_total", stage="loader")
    tokens0 = value("kafeed_tokens_total", stage="loader")
    count0 = value("kafeed_end_to_end_latency_seconds_count", stage="loader")
    stamps = np.array([now_ms - 2000, now_ms - 500, -1], dtype=np.int64)  # -1: no broker timestamp
    delivered = Delivered(per_topic={"lm-a": 2, "lm-b": 1}, timestamps=stamps,
                          positions={"lm-a:0": 7, "lm-b:3": 12})
    lm.batch(delivered, tokens=64)
    lm.batch(Delivered(positions={"lm-a:0": 9}), tokens=0)
    assert value("kafeed_batches_total", stage="loader") - batches0 == 2
    assert value("kafeed_tokens_total", stage="loader") - tokens0 == 64
    assert value("kafeed_records_in_total", stage="loader", topic="lm-a") == 2
    assert value("kafeed_records_in_total", stage="loader", topic="lm-b") == 1
    assert value("kafeed_end_to_end_latency_seconds_count", stage="loader") - count0 == 2
    assert value("kafeed_loader_position", topic="lm-a", partition="0") == 9
    assert value("kafeed_loader_position", topic="lm-b", partition="3") == 12


def test_delivered_of_reads_next_offsets_from_the_state() -> None:
    state = stream_entry(0, {"t:0": {"next": 4, "read": 9, "end": None, "delivered": [5, 6]},
                             "t:1": {"next": 0, "read": 0, "end": 0, "delivered": []}})
    d = Delivered.of(({"t": 3}, [10, 20, 30]), state)
    assert d.positions == {"t:0": 4, "t:1": 0} and d.per_topic == {"t": 3}
    assert d.timestamps.dtype == np.int64 and d.timestamps.tolist() == [10, 20, 30]


def test_delivered_crosses_from_a_worker_unchanged() -> None:
    import pickle

    d = Delivered(per_topic={"t": 2}, timestamps=np.array([5, -1], dtype=np.int64), positions={"t:0": 3},
                  sources={"a": 7})
    back = pickle.loads(pickle.dumps(d))
    assert (back.per_topic, back.positions, back.sources) == ({"t": 2}, {"t:0": 3}, {"a": 7})
    assert back.timestamps.dtype == np.int64 and back.timestamps.tolist() == [5, -1]


def test_batch_tokens() -> None:
    assert batch_tokens({"tokens": torch.zeros(4, 17, dtype=torch.int64)}) == 68
    assert batch_tokens({"targets": torch.zeros(4, 1)}) == 0


def test_only_main_process_readers_report_client_statistics() -> None:
    settings = LoaderSettings(topics=("t",), kind="tokens", seq_len=8, eos_id=0)
    main = KafkaSource(settings, index=0, count=1, client_stats=True).consumer_config()
    worker = KafkaSource(settings, index=0, count=2).consumer_config()
    assert isinstance(main["stats_cb"], StatsCallback) and main["stats_cb"].stage == "loader"
    assert main["statistics.interval.ms"] > 0
    assert "stats_cb" not in worker and "statistics.interval.ms" not in worker


def test_latency_is_taken_when_a_batch_is_handed_out_not_when_it_is_folded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import kafeed.loader.metrics as lm_module

    handed_out = 1_900_000_000.0
    lm = LoaderMetrics()
    lm.fold()  # a fresh fold clock: the batches below wait for a collection
    count0 = value("kafeed_end_to_end_latency_seconds_count", stage="loader")
    sum0 = value("kafeed_end_to_end_latency_seconds_sum", stage="loader")
    slow0 = value("kafeed_end_to_end_latency_seconds_bucket", stage="loader", le="2.5")
    monkeypatch.setattr(lm_module.time, "time", lambda: handed_out)
    two_s_old = np.array([handed_out * 1000 - 2000, -1], dtype=np.int64)  # -1: no broker timestamp
    lm.batch(Delivered(per_topic={"lm-c": 2}, timestamps=two_s_old), tokens=0)
    monkeypatch.setattr(lm_module.time, "time", lambda: handed_out + 100)  # folded long after
    lm.batch(Delivered(per_topic={"lm-c": 1}, timestamps=np.array([handed_out * 1000], dtype=np.int64)),
             tokens=0)
    assert lm._pending  # set aside, not yet counted
    assert value("kafeed_records_in_total", stage="loader", topic="lm-c") == 3  # collecting folds
    assert not lm._pending
    assert value("kafeed_end_to_end_latency_seconds_count", stage="loader") - count0 == 2
    assert value("kafeed_end_to_end_latency_seconds_sum", stage="loader") - sum0 == pytest.approx(2.0 + 100.0)
    assert value("kafeed_end_to_end_latency_seconds_bucket", stage="loader", le="2.5") - slow0 == 1


def test_batches_are_folded_without_a_collection_after_fold_s(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafeed.loader.metrics as lm_module

    lm = LoaderMetrics()
    lm.batch(Delivered(positions={"lm-d:0": 1}), tokens=0)
    assert lm._pending
    clock = lm_module.time.monotonic() + lm_module.FOLD_S
    monkeypatch.setattr(lm_module.time, "monotonic", lambda: clock)
    lm.batch(Delivered(positions={"lm-d:0": 2}), tokens=0)
    assert not lm._pending
