"""A disk that fills up under a broker: its only log dir on a small tmpfs, `kafeed ingest`
writing more than fits.

Kafka's answer to ENOSPC is to mark the log dir failed; the dir also holds the metadata log,
so the broker shuts itself down. On one node `kafeed ingest` then fails with one sentence
and `kafeed broker status` says the log dir is full; every committed record is in the topic
once, and the same command, run again once the disk has room, finishes the job exactly
once. On three nodes (RF 3, min ISR 2) the two others carry on: ingest finishes and every
acknowledged record is in the topic once.

Needs root to mount a tmpfs (skipped otherwise, with the reason). The three-node run is in the
default run; the one-node run is slow (`-m slow`): its failure waits out librdkafka's message
timeout (55 s) and the transaction abort (60 s).
`pytest -m "slow or not slow" tests/faults/test_disk_full.py -s`
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.ingest.progress import read_latest
from kafeed.topics import TopicAdmin, plan_topic
from tests.cluster_support import wait_brokers
from tests.integration.ingest_helpers import read_all, run_cli


@contextmanager
def small_disk(path: Path, size_mb: int) -> Iterator[Path]:
    """``path`` as the mount point of a ``size_mb`` tmpfs; skips the test where mounting is not
    allowed (needs root, or CAP_SYS_ADMIN, outside a locked-down container)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a full disk is simulated with a small tmpfs, and mounting one needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): no small disk "
                    "to fill")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def grow(path: Path, size_mb: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_mb}m", str(path)], check=True)


def incompressible_source(path: Path, records: int, chars: int = 2000) -> Path:
    """Records r0..rN-1 whose text zstd cannot shrink much (base64 of random bytes)."""
    rng = random.Random(5)
    with path.open("w") as fh:
        for i in range(records):
            text = base64.b64encode(rng.randbytes(chars * 3 // 4)).decode()
            fh.write(json.dumps({"id": f"r{i}", "text": text}) + "\n")
    return path


def stop_and_purge(cluster: LocalCluster, mount: Path) -> None:
    cluster.stop(timeout=10)
    subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)
    shutil.rmtree(cluster.data_dir, ignore_errors=True)


@pytest.mark.slow
def test_one_node_disk_full_fails_ingest_in_one_sentence_and_keeps_every_commit(tmp_path: Path) -> None:
    data = tmp_path / "kafka"
    with small_disk(data / "node-1" / "data", 8) as disk:
        cluster = LocalCluster(data, nodes=1, port=free_port_block(2), heap_mb=384, jit="quick")
        try:
            cluster.start()
            settings = ConnectionSettings(bootstrap=cluster.bootstrap)
            TopicAdmin(settings).create(plan_topic("full", brokers=1, partitions=3))
            records = 10_000  # ~20 MB of text, ~15 MB after zstd: twice what the 8 MB disk holds
            src = incompressible_source(tmp_path / "big.jsonl", records)
            args = [str(src), "-t", "full", "-b", cluster.bootstrap, "--commit-records", "1000",
                    "--job-id", "fill", "--no-progress"]

            failed = run_cli(*args, timeout=400)
            err = failed.stderr.decode()
            print(f"one node, disk full, ingest said:\n{err}")
            assert failed.returncode == 1, err
            errors = [line for line in err.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and "Traceback" not in err and "KafkaError{" not in err
            assert "were not acknowledged, so the transaction was aborted" in errors[0]
            assert "unreachable" in errors[0]

            shown = subprocess.run([sys.executable, "-m", "kafeed.cli.main", "broker", "status", "--data-dir",
                                    str(data)], capture_output=True, text=True, check=False,
                                   env={**os.environ, "COLUMNS": "200"})
            print(f"kafeed broker status said:\n{shown.stdout}")
            assert "down: its log dir is full (No space left on device)" in shown.stdout
            node = cluster.status().nodes[0]
            assert not node.alive and node.disk_free_bytes is not None and node.disk_free_bytes < 1_000_000

            grow(disk, 96)  # the operator makes room, restarts the node
            cluster.start()
            acked = read_latest(settings, "fill")
            assert acked is not None and not acked.finished
            keys = [r.key for r in read_all(settings, "full", timeout=120)]
            print(f"one node, disk full: acked {acked.totals['produced']}, found {len(keys)}, "
                  f"duplicated {len(keys) - len(set(keys))}")
            assert 0 < acked.totals["produced"] < records
            assert len(keys) == len(set(keys)) == acked.totals["produced"]

            rerun = run_cli(*args, timeout=400)
            assert rerun.returncode == 0, rerun.stderr.decode()
            keys = [r.key for r in read_all(settings, "full", timeout=120)]
            assert len(keys) == len(set(keys)) == records
        finally:
            stop_and_purge(cluster, disk)


def test_one_of_three_disks_full_ingest_goes_on_and_loses_nothing(tmp_path: Path) -> None:
    data = tmp_path / "kafka"
    with small_disk(data / "node-3" / "data", 4) as disk:
        cluster = LocalCluster(data, nodes=3, port=free_port_block(6), heap_mb=384, jit="quick")
        try:
            cluster.start()
            settings = ConnectionSettings(bootstrap=cluster.bootstrap)
            TopicAdmin(settings).create(plan_topic("full3", brokers=3, partitions=3))
            records = 4_500  # ~7 MB after zstd on every replica: node 3's 4 MB disk fills mid-run
            src = incompressible_source(tmp_path / "big.jsonl", records)
            done = run_cli(str(src), "-t", "full3", "-b", cluster.bootstrap, "--commit-records", "1000",
                           "--job-id", "fill3", "--no-progress", "--json", timeout=400)
            assert done.returncode == 0, done.stderr.decode()
            summary = json.loads(done.stdout)
            status = cluster.status()
            assert [n.alive for n in status.nodes] == [True, True, False]
            assert status.nodes[2].stopped_because == "its log dir is full (No space left on device)"
            wait_brokers(cluster.bootstrap, 2)
            keys = [r.key for r in read_all(settings, "full3", timeout=120)]
            print(f"one of three disks full: acked {summary['produced']}, found {len(keys)}, "
                  f"duplicated {len(keys) - len(set(keys))}; ingest took {summary['seconds']:.1f}s, "
                  f"printed on stderr: {done.stderr.decode().strip() or 'nothing'}")
            assert summary["produced"] == len(keys) == len(set(keys)) == records
        finally:
            stop_and_purge(cluster, disk)
