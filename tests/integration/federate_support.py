"""Helpers of the federated tests: site data, a job's TOML file, and the checks that read each
site's own ledger (never the coordinator's records)."""

from __future__ import annotations

import itertools
import logging
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Producer

from kafeed.federate.aggregate import fedavg, flatten
from kafeed.federate.blobs import blobs_of
from kafeed.federate.config import FederationSettings
from kafeed.federate.ledger import Ledger
from kafeed.kafka import KafkaClients
from kafeed.schema import make_document

VOCAB = 257


def produce_site_docs(bootstrap: str, topic: str, count: int, *, seed: int, marker: bytes) -> None:
    """``count`` documents of random bytes (one value range per site: non-IID) whose ids carry
    ``marker``, so that a scan of another cluster can tell a site record when it sees one."""
    rng = np.random.default_rng(seed)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                  "logger": logging.getLogger("kafeed.librdkafka")})
    low = (seed * 37) % 128
    for i in range(count):
        tokens = rng.integers(low, low + 128, size=int(rng.integers(20, 80)))
        doc = make_document(tokens, id=f"{marker.decode()}-{i}", vocab_size=VOCAB, tokenizer="bytes")
        p.produce(topic, key=f"{marker.decode()}-{i}".encode(), value=doc.SerializeToString())
    assert p.flush(30) == 0


def write_job(path: Path, *, training: str, sites: dict[str, tuple[str, str]], state_dir: Path,
              **extra: Any) -> Path:
    """A job file: ``sites`` maps a site's name to (its bootstrap, its topic)."""
    lines = [f'job = "fl-{uuid.uuid4().hex[:8]}"', f'state_dir = "{state_dir}"']
    for key, value in extra.items():
        lines.append(f"{key} = {value!r}" if not isinstance(value, str) else f'{key} = "{value}"')
    lines += ["[training]", f'bootstrap = "{training}"', "[model]", "d_model = 16", "n_heads = 2",
              "seq_len = 16"]
    for name, (bootstrap, topic) in sites.items():
        lines += ["[[sites]]", f'name = "{name}"', f'bootstrap = "{bootstrap}"', f'topics = ["{topic}"]']
    path.write_text("\n".join(lines).replace("True", "true").replace("False", "false") + "\n")
    return path


def global_versions(settings: FederationSettings) -> dict[int, tuple[dict[str, np.ndarray], dict[str, Any]]]:
    clients = KafkaClients(settings.training_connection())
    blobs = blobs_of(clients.read_to_end(settings.global_topic), what="global")
    out = {}
    for blob in blobs:
        arrays, meta = blob.arrays()
        if "kind" not in meta:  # not a secure round's control message
            out[int(meta["version"])] = (arrays, meta)
    return out


def check_rounds_from_ledgers(settings: FederationSettings) -> list[list[str]]:
    """Each version N (N >= 1) is version N-1 plus the sample-weighted mean of the deltas of
    the updates it names, read from each contributing site's ledger; returns who contributed."""
    versions = global_versions(settings)
    assert sorted(versions) == list(range(settings.rounds + 1)), sorted(versions)
    contributors = []
    for version in range(1, settings.rounds + 1):
        arrays, meta = versions[version]
        base = flatten(versions[version - 1][0])
        deltas, weights, names = [], [], []
        for c in meta["contributors"]:
            entry = Ledger(settings.site_dir(c["site"])).entry(int(c["round"]))
            assert entry is not None, f"{c['site']} has no ledger entry for round {c['round']}"
            assert c["samples"] in (None, entry.samples)  # None: secure, only the sum is known
            deltas.append(flatten(entry.delta()))
            weights.append(entry.samples)
            names.append(c["site"])
        assert meta["samples"] == sum(weights)
        assert len(set(zip(names, (c["round"] for c in meta["contributors"]), strict=True))) == len(names)
        expected = base + fedavg(deltas, weights) if deltas else base
        np.testing.assert_allclose(flatten(arrays), expected, rtol=0, atol=1e-6)
        contributors.append(names)
    return contributors


def assert_no_round_counted_twice(settings: FederationSettings) -> None:
    seen: list[tuple[str, int]] = []
    for _, (_, meta) in sorted(global_versions(settings).items()):
        seen += [(c["site"], int(c["round"])) for c in meta["contributors"]]
    assert len(seen) == len(set(seen)), seen


def assert_loader_resumed_exactly(settings: FederationSettings, site: str) -> None:
    """Each ledger entry's data starts where the one before ended, partition by partition: the
    site's loader resumed exactly, whatever happened to the site between them."""
    ends: dict[str, int] = {}
    for entry in Ledger(settings.site_dir(site)).entries():
        for key, part in entry.offsets().items():
            assert part["start"] == ends.get(key, 0), (site, entry.round, key, part, ends)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(part["ranges"]))
            ends[key] = part["next"]


def scan_for(clients: KafkaClients, markers: list[bytes]) -> int:
    """Every record of every topic of the cluster (internal ones too) searched for ``markers``;
    returns the number of records read. Fails on the first record that holds one."""
    topics = clients.admin().list_topics(timeout=15).topics
    count = 0
    for topic in sorted(topics):
        for msg in clients.read_to_end(topic):
            parts = [msg.value() or b"", msg.key() or b"", *(v or b"" for _, v in msg.headers() or ())]
            for marker in markers:
                assert not any(marker in part for part in parts), f"{marker!r} found in {topic}"
            count += 1
    return count
