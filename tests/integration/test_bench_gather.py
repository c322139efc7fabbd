"""benchmarks/bench_gather.py's smoke run: a few checkpoints of two ranks against one, on the
session's broker, so that the benchmark keeps running (its numbers are read from a full run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kafeed.config import ConnectionSettings

ROOT = Path(__file__).resolve().parents[2]


def test_bench_gather_measures_a_checkpoint_of_two_ranks_against_one(kafka: ConnectionSettings) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gather.py"), "--bootstrap", kafka.bootstrap,
         "--world", "2", "--partitions", "4", "--per-partition", "40", "--shuffle-buffer", "32",
         "--batches", "2", "--seq-len", "64", "--checkpoints", "3", "--json"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    one, two = result["rows"]
    assert (one["world"], two["world"]) == (1, 2)
    # every rank's full buffer is in the gathered document: two ranks' readers, one reader alone
    assert 31 <= one["buffer_entries"] <= 32 and 62 <= two["buffer_entries"] <= 64
    assert two["document_bytes"] > one["document_bytes"] > 0
    assert one["median_ms"] > 0 and two["median_ms"] > 0 and result["ratio"] > 0
