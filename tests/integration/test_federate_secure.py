"""Secure aggregation over Kafka: three sites, one of them stopped after it sent its keys (a
dropout after the roster), so the round's first attempt cannot open and is redone, and the
coordinator SIGKILLed in the next round once the masked updates are in; the stored
masked updates are not the sites' updates, and unmasking what the training cluster holds gives
exactly the sum of the sites' quantized updates, read from their own ledgers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kafeed.config import ConnectionSettings
from kafeed.federate.aggregate import flatten
from kafeed.federate.blobs import blobs_of
from kafeed.federate.config import load_federation
from kafeed.federate.ledger import Ledger
from kafeed.federate.secagg import FixedPoint, MaskedUpdate, quantize, round_tag, sum_masked, unmask
from kafeed.federate.setup import create_topics
from kafeed.kafka import KafkaClients
from tests.integration.federate_support import (
    assert_no_round_counted_twice,
    check_rounds_from_ledgers,
    global_versions,
    produce_site_docs,
    write_job,
)
from tests.integration.process_output import StderrLines
from tests.kafka_fixtures import TopicFactory

ROOT = Path(__file__).resolve().parents[2]
SITES = ("site-a", "site-b", "site-c")


def _cli(*args: str) -> tuple[subprocess.Popen[str], StderrLines]:
    proc = subprocess.Popen([sys.executable, "-m", "kafeed.cli.main", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"})
    return proc, StderrLines(proc)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_dropout_after_the_roster_redoes_the_round_and_the_sum_is_exact(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topics = {name: make_topic(prefix=f"fed-secure-{name}") for name in SITES}
    for seed, (name, topic) in enumerate(topics.items()):
        produce_site_docs(kafka.bootstrap, topic, 80, seed=seed + 1, marker=f"secret{name}".encode())
    path = write_job(tmp_path / "job.toml", training=kafka.bootstrap,
                     sites={n: (kafka.bootstrap, t) for n, t in topics.items()}, state_dir=tmp_path / "state",
                     rounds=2, local_steps=3, batch_size=4, lr=0.05, quorum=2, deadline_s=20.0, secure=True)
    settings = load_federation(path)
    create_topics(settings)
    coordinator, coordinator_lines = _cli("federate", "coordinator", "--config", str(path))
    sites = {name: _cli("federate", "site", "--config", str(path), "--site", name) for name in SITES}

    # site-c stops right after it sent its round-1 keys: it is in the roster (the deadline is long
    # enough for every site's keys, so the roster waits for all three) but never masks.
    proc, lines = sites["site-c"]
    lines.wait_for("keys      site=site-c round=1")
    proc.send_signal(signal.SIGSTOP)
    coordinator_lines.wait_for("redo", timeout=120)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.stdout is not None
    proc.stdout.close()
    lines.close()
    sites["site-c"] = _cli("federate", "site", "--config", str(path), "--site", "site-c")

    # The coordinator dies once round 2's masked updates are all in; its successor goes on from
    # the roster and "received" it published, reading the masked updates and seeds again.
    coordinator_lines.wait_for("received  round=2", timeout=300)
    coordinator.send_signal(signal.SIGKILL)
    coordinator.wait(30)
    assert coordinator.stdout is not None
    coordinator.stdout.close()
    coordinator_lines.close()
    coordinator, coordinator_lines = _cli("federate", "coordinator", "--config", str(path), "--json")
    out, err = coordinator_lines.finish(timeout=300)
    assert coordinator.returncode == 0, err[-3000:]
    for name, (proc, lines) in sites.items():
        _, site_err = lines.finish(timeout=120)
        assert proc.returncode == 0, (name, site_err[-3000:])

    assert json.loads(out)["resumed_at"] in (1, 2)
    versions = global_versions(settings)
    assert versions[1][1]["secure_attempts"] >= 2 and not versions[1][1]["failed"], versions[1][1]
    assert all(c["samples"] is None for v in (1, 2) for c in versions[v][1]["contributors"])
    check_rounds_from_ledgers(settings)
    assert_no_round_counted_twice(settings)

    # From what the training cluster stores: each masked update is not its site's update, and
    # the roster's masked updates with their seeds unmask to the exact integer sum of the sites'
    # quantized updates (their ledgers' deltas and sample counts).
    clients = KafkaClients(kafka)
    fixed = FixedPoint()
    for version in (1, 2):
        meta = versions[version][1]
        attempt = meta["secure_attempts"] - 1
        tag = round_tag(settings.job, version, attempt)
        masked, seeds, plain = [], {}, []
        for c in meta["contributors"]:
            entry = Ledger(settings.site_dir(c["site"])).entry(version)
            assert entry is not None
            quantized = quantize(flatten(entry.delta()), entry.samples, fixed)
            plain.append(quantized)
            for blob in blobs_of(clients.read_to_end(settings.update_topic(c["site"])), what="test"):
                arrays, m = blob.arrays()
                if (m.get("round"), m.get("attempt")) != (version, attempt):
                    continue
                assert m["kind"] != "update" and "samples" not in m
                if m["kind"] == "masked":
                    assert not np.array_equal(arrays["values"], quantized)
                    assert np.mean(arrays["values"] == quantized) < 0.01
                    masked.append(MaskedUpdate(c["site"], tag, arrays["values"]))
                elif m["kind"] == "seed":
                    seeds[c["site"]] = bytes.fromhex(m["seed"])
        roster = [c["site"] for c in meta["contributors"]]
        total = unmask(sum_masked(masked, roster=roster, round_tag=tag, length=len(plain[0]) - 1),
                       seeds=seeds, round_tag=tag)
        assert np.array_equal(total, np.sum(plain, axis=0, dtype=np.uint64))
