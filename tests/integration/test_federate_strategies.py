"""FedProx (the proximal term in every local step) and FedAdam (the server's moments kept in
the round log, taken up by a resumed coordinator) run their rounds end to end."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.federate.config import load_federation
from kafeed.federate.coordinator import Coordinator, read_round_log
from kafeed.federate.setup import create_topics
from kafeed.federate.site import SiteRunner
from kafeed.kafka import KafkaClients
from tests.integration.federate_support import produce_site_docs, write_job
from tests.kafka_fixtures import TopicFactory


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fedprox", "fedadam"])
def test_each_strategy_runs_and_resumes(kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
                                       strategy: str) -> None:
    topics = {name: make_topic(prefix=f"fed-{name}") for name in ("site-a", "site-b")}
    for seed, topic in enumerate(topics.values()):
        produce_site_docs(kafka.bootstrap, topic, 60, seed=seed + 1, marker=b"x")
    path = write_job(tmp_path / "job.toml", training=kafka.bootstrap,
                     sites={n: (kafka.bootstrap, t) for n, t in topics.items()},
                     state_dir=tmp_path / "state", rounds=2, local_steps=3, batch_size=4, lr=0.05, quorum=2,
                     deadline_s=0.0, strategy=strategy)
    settings = load_federation(path)
    create_topics(settings)
    runners = [SiteRunner(settings, name) for name in topics]
    threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
    for t in threads:
        t.start()
    assert Coordinator(settings).run().final_version == 2
    for t in threads:
        t.join(30)
    # a second coordinator resumes (FedAdam: its moments from the round log) and finds the job done
    again = Coordinator(settings).run()
    assert again.resumed_at == 2
    arrays, meta = read_round_log(KafkaClients(kafka), settings)[-1].arrays()
    assert meta["strategy"] == strategy
    if strategy == "fedadam":
        assert set(arrays) == {"m", "v"} and meta["adam_rounds"] == 2
    else:
        assert arrays == {}
