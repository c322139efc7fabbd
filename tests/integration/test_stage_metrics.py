"""Each pipeline stage's Prometheus metrics, read back from kafeed's registry after a real run."""

from __future__ import annotations

import json
from pathlib import Path

from kafeed.config import ConnectionSettings
from kafeed.ingest import IngestOptions, ingest
from kafeed.monitor import metrics as m
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
