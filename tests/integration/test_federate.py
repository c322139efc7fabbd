"""Federated rounds against the session broker: two sites and the coordinator in one process,
two rounds, a wrong-shaped update that the round survives; every aggregate checked from the
sites' own ledgers."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.federate.blobs import encode_arrays, produce_blob
from kafeed.federate.config import load_federation
from kafeed.federate.coordinator import Coordinator
from kafeed.federate.ledger import Ledger
from kafeed.federate.setup import create_topics
from kafeed.federate.site import SiteRunner
from kafeed.kafka import KafkaClients
from kafeed.monitor.dashboard import render
from kafeed.monitor.watch import ClusterMonitor
from kafeed.telemetry.metrics import REGISTRY
from tests.integration.federate_support import (
    assert_no_round_counted_twice,
    check_rounds_from_ledgers,
    produce_site_docs,
    write_job,
)
from tests.kafka_fixtures import TopicFactory


@pytest.mark.timeout(90)
def test_two_sites_two_rounds_from_their_ledgers(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topics = {name: make_topic(prefix=f"fed-{name}") for name in ("site-a", "site-b")}
    for seed, (name, topic) in enumerate(topics.items()):
        produce_site_docs(kafka.bootstrap, topic, 60, seed=seed + 1, marker=f"secret{name}".encode())
    path = write_job(tmp_path / "job.toml", training=kafka.bootstrap,
                     sites={n: (kafka.bootstrap, t) for n, t in topics.items()}, state_dir=tmp_path / "state",
                     rounds=2, local_steps=3, batch_size=4, lr=0.05, quorum=2, deadline_s=0.0,
                     late_policy="next")
    settings = load_federation(path)
    assert create_topics(settings).created
    # A stray update of the wrong shape, first in site-a's topic: rejected, the round goes on.
    producer = KafkaClients(kafka).transactional_producer(transactional_id=f"{settings.job}.stray",
                                                          stage="test")
    producer.init()
    producer.begin()
    produce_blob(producer, settings.update_topic("site-a"), "r1.site-a",
                 encode_arrays({"tok.weight": np.zeros((3, 3), np.float32)},
                               {"site": "site-a", "round": 1, "samples": 5, "base_version": 0}))
    producer.commit()

    stop = threading.Event()
    runners = [SiteRunner(settings, name, stop=stop) for name in topics]
    threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
    for t in threads:
        t.start()

    def resend_once_round_1_is_published(event: str, info: dict[str, object]) -> None:
        # site-a "restarted" after sending: its ledger's round-1 update goes out again (a new
        # producer of the same transactional id, fencing the running one) while round 2 is
        # collected. Counted once (it is in version 1), not folded into round 2.
        if event == "published" and info["version"] == 1:
            restarted = SiteRunner(settings, "site-a")
            entry = restarted.ledger.entry(1)
            assert entry is not None
            restarted._send(entry)

    summary = Coordinator(settings, progress=resend_once_round_1_is_published).run()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)

    assert summary.final_version == 2
    assert [r["counts"]["rejected"] for r in summary.rounds] == [1, 0]
    assert [r["counts"]["duplicate"] for r in summary.rounds] == [0, 1]
    assert_no_round_counted_twice(settings)
    assert [sorted(r.summary.rounds_trained) for r in runners] == [[1, 2], [1, 2]]
    assert [sorted(names) for names in check_rounds_from_ledgers(settings)] == [["site-a", "site-b"]] * 2
    # Each site's ledger names the data offsets it trained on, round after round, without overlap.
    for name in topics:
        entries = Ledger(settings.site_dir(name)).entries()
        ranges = [r for e in entries for part in e.offsets().values() for r in part["ranges"]]
        assert ranges and all(a[1] <= b[0] for a, b in itertools.pairwise(ranges)), ranges
    # The global model's lineage: its rounds, their sites, each update's data offsets (ledgers).
    assert main(["lineage", str(path), "--json"]) == 0
    lineage = json.loads(capsys.readouterr().out)
    assert [r["version"] for r in lineage["rounds"]] == [1, 2]
    for r in lineage["rounds"]:
        for site in r["sites"]:
            entry = Ledger(settings.site_dir(site["site"])).entry(site["round"])
            assert entry is not None and site["ledger"]["partitions"] == entry.offsets() != {}
    # kafeed monitor finds the job and shows its last round; the cluster-side gauges follow it.
    with ClusterMonitor(kafka) as monitor:
        snapshot = monitor.poll()
        row = next(j for j in snapshot.federated if j["job"] == settings.job)
        assert (row["version"], sorted(row["sites"]), row["rounds_closed"]) == (2, sorted(topics), 2)
        assert row["update_bytes"] > 0
        console = Console(width=200, record=True)
        console.print(render(snapshot))
        assert "federated rounds" in console.export_text()
    assert REGISTRY.get_sample_value("kafeed_federate_global_version", {"job": settings.job}) == 2
    # Nothing of a site's records is on the job's topics of the training cluster.
    reads = KafkaClients(kafka)
    for topic in (settings.global_topic, settings.rounds_topic, *map(settings.update_topic, topics)):
        for msg in reads.read_to_end(topic):
            assert b"secret" not in (msg.value() or b"") and b"secret" not in (msg.key() or b"")
