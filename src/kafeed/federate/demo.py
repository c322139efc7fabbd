"""`make demo-federated`: three sites and a coordinator on one machine.

Two local brokers: the training cluster, and one broker that stands for the three sites'
clusters (each site reads only its own topic, ``<site>.tokens``, and the job's file gives each
site its own bootstrap entry, so a real deployment changes addresses, not code). The bundled
corpus is cut in three contiguous parts, one per site (a non-IID split: each site holds other
plays), byte-tokenized. The sites run as processes of their own (``kafeed federate site``); the
coordinator runs here and prints its rounds; the lineage of the final model closes the demo.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.federate.config import load_federation
from kafeed.federate.coordinator import Coordinator
from kafeed.federate.lineage import global_lineage
from kafeed.federate.setup import create_topics
from kafeed.kafka import KafkaClients
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic

SITES = ("site-a", "site-b", "site-c")
EOS = 256


def _paragraphs() -> list[bytes]:
    corpus = resources.files("kafeed.data").joinpath("tinyshakespeare.txt.gz")
    with corpus.open("rb") as fh, gzip.open(fh) as src:
        text = src.read()
    return [p.strip() for p in text.split(b"\n\n") if p.strip()]


def _fill_site(connection: ConnectionSettings, topic: str, paragraphs: list[bytes]) -> int:
    TopicAdmin(connection).create(plan_topic(topic, brokers=1, partitions=1), exist_ok=True)
    producer = KafkaClients(connection).producer({"linger.ms": 20})
    for i, paragraph in enumerate(paragraphs):
        doc = make_document(np.frombuffer(paragraph, dtype=np.uint8), id=f"{topic}-{i}", vocab_size=EOS + 1,
                            tokenizer="bytes")
        while True:
            try:
                producer.produce(topic, doc.SerializeToString(), key=f"{topic}-{i}".encode())
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return len(paragraphs)


def job_file(path: Path, *, training: str, sites: str, state_dir: Path, rounds: int, secure: bool) -> Path:
    lines = [f'job = "demo-fl-{uuid.uuid4().hex[:6]}"', f"rounds = {rounds}", "local_steps = 15",
             f"secure = {'true' if secure else 'false'}",
             "batch_size = 8", "lr = 0.3", "quorum = 2", "deadline_s = 5.0", 'late_policy = "next"',
             f'state_dir = "{state_dir}"', "[training]", f'bootstrap = "{training}"',
             "[model]", "seq_len = 32", "d_model = 32", "n_heads = 2", "n_layers = 1"]
    for name in SITES:
        lines += ["[[sites]]", f'name = "{name}"', f'bootstrap = "{sites}"', f'topics = ["{name}.tokens"]']
    path.write_text("\n".join(lines) + "\n")
    return path


def run_demo(work: Path, *, rounds: int = 3, secure: bool = False, say: Callable[[str], None],
             progress: Callable[[str, dict[str, Any]], None]) -> dict[str, Any]:
    """Start the two brokers, fill the sites, run the job; stops the brokers on the way out."""
    clusters = {name: LocalCluster(work / name, nodes=1, port=free_port_block(2), heap_mb=512, jit="quick")
                for name in ("training", "sites")}
    say("Starting the training cluster and the sites' cluster (local brokers)...")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda c: c.start(timeout=180), clusters.values()))
    try:
        training, sites = (ConnectionSettings(bootstrap=c.bootstrap) for c in clusters.values())
        paragraphs = _paragraphs()
        third = len(paragraphs) // len(SITES)
        counts = {name: _fill_site(sites, f"{name}.tokens", paragraphs[i * third:(i + 1) * third])
                  for i, name in enumerate(SITES)}
        say("Sites' data (never leaves their cluster): "
            + ", ".join(f"{name} {n:,} paragraphs" for name, n in counts.items()))
        path = job_file(work / "job.toml", training=training.bootstrap, sites=sites.bootstrap,
                        state_dir=work / "state", rounds=rounds, secure=secure)
        settings = load_federation(path)
        create_topics(settings)
        logs = {name: (work / f"{name}.log").open("w") for name in SITES}
        procs = {name: subprocess.Popen([sys.executable, "-m", "kafeed.cli.main", "federate", "site",
                                         "--config", str(path), "--site", name],
                                        stdout=logs[name], stderr=subprocess.STDOUT)
                 for name in SITES}
        say(f"Three sites started (logs in {work}/site-*.log); the coordinator's rounds:")
        try:
            summary = Coordinator(settings, progress=progress).run()
            for name, proc in procs.items():
                if proc.wait(timeout=120) != 0:
                    raise KafeedError(f"Site {name} failed; see {work / (name + '.log')}.")
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(30)
            for log in logs.values():
                log.close()
        return {"job": settings.job, "config": str(path), "summary": summary.as_dict(),
                "lineage": global_lineage(settings), "site_docs": counts}
    finally:
        for cluster in clusters.values():
            cluster.stop(timeout=15, purge=True)
