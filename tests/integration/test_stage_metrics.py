"""Each pipeline stage's Prometheus metrics, read back from kafeed's registry after a real run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import kafeed
from kafeed.broker import free_port_block
from kafeed.config import ConnectionSettings
from kafeed.ingest import IngestOptions, ingest
from kafeed.telemetry import metrics as m
from tests.integration.ingest_helpers import SRC
from tests.integration.loader_data import EOS, counts, produce_docs, produce_samples
from tests.integration.train_data import paragraphs, produce_documents
from tests.kafka_fixtures import TopicFactory


def value(name: str, **labels: str) -> float:
    return m.REGISTRY.get_sample_value(name, labels) or 0.0


def total(name: str, **labels: str) -> float:
    """Sum of every sample of ``name`` whose labels include ``labels`` (e.g. all clients of a stage)."""
    return sum(s.value for metric in m.REGISTRY.collect() for s in metric.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def test_ingest_counts_records_bytes_dead_letters_and_transactions(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    src = tmp_path / "m.jsonl"
    good = [json.dumps({"id": f"m{i}", "text": f"metric doc {i}"}) for i in range(300)]
    src.write_text("\n".join([*good, "{not json", '{"id": "x", "text": null}']) + "\n")
    commits0 = value("kafeed_transactions_total", stage="ingest", result="commit")
    tx0 = total("kafeed_client_tx_bytes_total", stage="ingest")
    dead0 = {r: value("kafeed_dead_lettered_total", stage="ingest", reason=r)
             for r in ("bad_json", "null_text")}

    summary = ingest([src], topic=topic, settings=kafka, options=IngestOptions(commit_records=100))

    assert (summary.produced, summary.dead_lettered) == (300, 2)
    assert value("kafeed_records_out_total", stage="ingest", topic=topic) == 300
    assert value("kafeed_bytes_out_total", stage="ingest", topic=topic) == summary.bytes_serialized > 0
    dead = {r: value("kafeed_dead_lettered_total", stage="ingest", reason=r) - dead0[r] for r in dead0}
    assert dead == {k: float(v) for k, v in summary.dead_letter_kinds.items()}, summary.dead_letter_kinds
    assert value("kafeed_transactions_total", stage="ingest", result="commit") - commits0 \
        == summary.transactions >= 3
    # librdkafka's statistics (chained with ingest's own per-partition counts) reached the metrics
    assert total("kafeed_client_tx_bytes_total", stage="ingest") > tx0


def _latency() -> tuple[float, float]:
    return (value("kafeed_end_to_end_latency_seconds_count", stage="loader"),
            value("kafeed_end_to_end_latency_seconds_sum", stage="loader"))


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_counts_batches_tokens_records_positions_and_latency(
        kafka: ConnectionSettings, make_topic: TopicFactory, workers: int) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 150, seed=3)
    batches0 = value("kafeed_batches_total", stage="loader")
    tokens0 = value("kafeed_tokens_total", stage="loader")
    count0, sum0 = _latency()
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, connection=kafka, eos_id=EOS, shuffle_buffer=8)
    loader = kafeed.StreamLoader(ds, batch_size=4, num_workers=workers)

    it = iter(loader)
    first = [next(it) for _ in range(3)]
    # mid-epoch (workers prefetch further): the figures describe what was handed out
    assert value("kafeed_batches_total", stage="loader") - batches0 == 3
    assert _latency()[0] - count0 == value("kafeed_records_in_total", stage="loader", topic=topic) > 0
    rest = list(it)
    batches = first + rest

    assert np.array_equal(counts(batches, len(expected)), expected)  # metrics did not disturb the data
    assert value("kafeed_batches_total", stage="loader") - batches0 == len(batches)
    assert value("kafeed_tokens_total", stage="loader") - tokens0 == sum(b["tokens"].numel() for b in batches)
    # every document's last token was handed out: one record and one latency observation each
    assert value("kafeed_records_in_total", stage="loader", topic=topic) == 150
    count, seconds = _latency()
    assert count - count0 == 150
    assert 0 <= (seconds - sum0) / 150 < 120  # produced moments ago, not at the epoch or in the future
    state = loader.state_dict()
    nexts = {key: p["next"] for r in state["readers"].values()
             for key, p in r["reader"]["partitions"].items()}
    assert len(nexts) == 3 and sum(nexts.values()) == 150
    for key, offset in nexts.items():
        t, _, p = key.rpartition(":")
        assert value("kafeed_loader_position", topic=t, partition=p) == offset


def test_loader_samples_count_records_not_tokens(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    produce_samples(kafka.bootstrap, topic, 30)
    tokens0 = value("kafeed_tokens_total", stage="loader")
    count0, _ = _latency()
    batches = list(kafeed.StreamLoader(kafeed.KafkaSampleDataset(topic, connection=kafka), batch_size=8))
    assert len(batches) == 4
    assert value("kafeed_records_in_total", stage="loader", topic=topic) == 30
    assert _latency()[0] - count0 == 30
    assert value("kafeed_tokens_total", stage="loader") == tokens0


def _scrape(port: int) -> dict[str, float]:
    """``name{labels}`` -> value from a /metrics page (comments skipped)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, number = line.rpartition(" ")
            samples[name] = float(number)
    return samples


def test_train_cli_serves_trainer_and_loader_metrics(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                     tmp_path: Path) -> None:
    from kafeed.demo import bundled_corpus

    topic = make_topic(partitions=2)
    corpus = bundled_corpus(tmp_path / "corpus.txt")  # far more text than the test waits for
    produce_documents(kafka, topic, paragraphs(corpus), partitions=2)
    port = free_port_block(1)
    cmd = [sys.executable, "-m", "kafeed.cli.main", "train", "--model", "gpt", "--topic", topic,
           "--steps", "100000", "--batch-size", "4", "--seq-len", "64", "--d-model", "32",
           "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "100000", "--log-every", "5",
           "-b", kafka.bootstrap, "--json", "--metrics-port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(SRC)})
    try:
        deadline = time.monotonic() + 120
        got: dict[str, float] = {}
        while time.monotonic() < deadline:
            try:
                got = _scrape(port)
            except OSError:
                got = {}
            if got.get('kafeed_train_step{stage="train"}', 0) >= 5:
                break
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.3)
        assert got.get('kafeed_train_step{stage="train"}', 0) >= 5, got
        loader_batches = got['kafeed_batches_total{stage="loader"}']
        assert loader_batches >= got['kafeed_batches_total{stage="train"}'] >= 5
        assert got['kafeed_tokens_total{stage="loader"}'] == loader_batches * 4 * 65
        assert got[f'kafeed_records_in_total{{stage="loader",topic="{topic}"}}'] > 0
        assert got['kafeed_end_to_end_latency_seconds_count{stage="loader"}'] > 0
        # present for both partitions (the value may still be 0: the shuffle buffer holds
        # early records in flight, and the position is the exact-resume point)
        assert all(got.get(f'kafeed_loader_position{{partition="{p}",topic="{topic}"}}', -1) >= 0
                   for p in (0, 1)), got
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]  # stopped by SIGTERM: the scheduler may requeue it
    assert json.loads(out)["stopped_by_signal"] is True


def test_prepare_metrics_balance_like_its_stats(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    from kafeed.prepare import PrepareSettings, run_prepare
    from tests.prepare_support import paragraphs, produce, sample_record

    raw = make_topic(partitions=2)
    good = paragraphs(30, seed="metrics")
    records = [sample_record(t) for t in good] + [sample_record(t) for t in good[:4]]  # 4 duplicates
    records += [sample_record("Hi"), (b"garbage", b"\xff\xff\xff", None)]  # filtered, dead-lettered
    produce(kafka, raw, records)
    filters = ("min_words", "symbol_ratio", "duplicate_lines")
    before = {
        "dups": value("kafeed_duplicates_total", stage="prepare"),
        "commits": value("kafeed_transactions_total", stage="prepare", result="commit"),
        "tokens": value("kafeed_tokens_total", stage="prepare"),
        "dead": total("kafeed_dead_lettered_total", stage="prepare"),
        **{f: value("kafeed_filtered_total", stage="prepare", filter=f) for f in filters},
    }
    settings = PrepareSettings(input=raw, output=f"{raw}.tokens", group=f"g-{raw}", idle_s=1.0,
                               kafka={"batch_size": 10, "transaction_timeout_ms": 10_000})  # type: ignore[arg-type]
    stats = run_prepare(settings, kafka, until_caught_up=True)

    assert stats.balanced and stats.records_in == len(records) and stats.duplicates == 4
    assert value("kafeed_records_in_total", stage="prepare", topic=raw) == stats.records_in
    raw_bytes = sum(len(r[1] or b"") for r in records)
    assert value("kafeed_bytes_in_total", stage="prepare", topic=raw) == raw_bytes
    assert value("kafeed_records_out_total", stage="prepare", topic=settings.output) == stats.documents_out
    assert value("kafeed_bytes_out_total", stage="prepare", topic=settings.output) > 0
    assert value("kafeed_tokens_total", stage="prepare") - before["tokens"] == stats.tokens_out
    assert value("kafeed_duplicates_total", stage="prepare") - before["dups"] == stats.duplicates
    assert {f: value("kafeed_filtered_total", stage="prepare", filter=f) - before[f] for f in filters
            if value("kafeed_filtered_total", stage="prepare", filter=f) - before[f]} == stats.filtered
    assert total("kafeed_dead_lettered_total", stage="prepare") - before["dead"] == stats.dead_lettered == 1
    assert value("kafeed_transactions_total", stage="prepare", result="commit") - before["commits"] \
        == stats.batches >= 4
