"""`kafeed train` start-up: launch to first fetch, to the readiness line, to the first step.

Starts a LocalCluster on free ports in a temp dir, produces byte-tokenized documents,
then launches ``kafeed train`` ``--runs`` times as a user would (a fresh process each
time) and reports, from the moment of launch:

- first fetch: librdkafka holds the first fetched records of the loader's consumer (read
  from the consumer's statistics, whose ``ts`` is CLOCK_MONOTONIC like time.monotonic);
- ready: the line ``train: waiting for data on ...``;
- first step: the first progress line (``--log-every 1``);
- ``import torch`` alone in a fresh interpreter, for scale.

    PYTHONPATH=src python benchmarks/bench_train_start.py --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.prepare.settings import TokenizerSettings
from kafeed.prepare.tokenize import load_tokenizer
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic

# The child: the real CLI, with the loader consumer's statistics recorded (every 50 ms).
CHILD = r"""
import json, sys, time
from kafeed.loader.sources import kafka_source
first = []
extra = kafka_source.KafkaSource._consumer_extra
def traced(self):
    conf = extra(self)
    chained = self._clients.config(conf, stage=self._stage).get("stats_cb")  # the loader's own, if any
    def on_stats(text):
        if not first:
            doc = json.loads(text)
            parts = [p for t in doc.get("topics", {}).values() for p in t.get("partitions", {}).values()]
            if any(p.get("fetchq_cnt", 0) > 0 or p.get("rxmsgs", 0) > 0 for p in parts):
                first.append(doc["ts"] / 1e6)
        if chained is not None:
            chained(text)
    conf.update({"stats_cb": on_stats, "statistics.interval.ms": 50})
    return conf
kafka_source.KafkaSource._consumer_extra = traced
from kafeed.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"first_fetch": first[0] if first else None}), file=sys.stderr, flush=True)
sys.exit(code)
"""


def produce(bootstrap: str, topic: str, docs: int) -> None:
    tok = load_tokenizer(TokenizerSettings(name="bytes"))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(docs):
        ids = [(i * 7 + j) % 256 for j in range(300)]
        doc = make_document(ids, id=f"doc-{i}", vocab_size=tok.vocab_size, tokenizer=tok.fingerprint)
        producer.produce(topic, key=doc.id.encode(), value=doc.SerializeToString())
    producer.flush(60)


def one_run(bootstrap: str, topic: str, ckpt: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-c", CHILD, "train", "--topic", topic, "--steps", "3", "--batch-size", "2",
           "--seq-len", "64", "--d-model", "32", "--n-layers", "1", "--log-every", "1",
           "--checkpoint-dir", str(ckpt), "--checkpoint-every", "0", "-b", bootstrap]
    t0 = time.monotonic()
    marks: dict[str, Any] = {}
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            now = time.monotonic() - t0
            if "waiting for data" in line:
                marks.setdefault("ready_s", round(now, 2))
            elif line.lstrip().startswith("step") and "/3" in line:
                marks.setdefault("first_step_s", round(now, 2))
            elif line.startswith('{"first_fetch"'):
                at = json.loads(line)["first_fetch"]
                marks["first_fetch_s"] = None if at is None else round(at - t0, 2)
    marks["exit"] = proc.returncode
    return marks


def torch_import() -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return round(time.monotonic() - t0, 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2))
        cluster.start()
        try:
            admin = TopicAdmin(ConnectionSettings(bootstrap=cluster.bootstrap))
            admin.create(plan_topic("start-tokens", brokers=1, partitions=2))
            produce(cluster.bootstrap, "start-tokens", 400)
            runs = []
            for i in range(args.runs):
                runs.append({**one_run(cluster.bootstrap, "start-tokens", Path(tmp) / f"ck{i}"),
                             "import_torch_s": torch_import()})
                print(json.dumps(runs[-1]), flush=True)
        finally:
            cluster.stop(purge=True)
    summary = {key: statistics.median(r[key] for r in runs if r.get(key) is not None)
               for key in ("first_fetch_s", "ready_s", "first_step_s", "import_torch_s")}
    print(json.dumps({"median": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
