"""A seconds-long run of benchmarks/bench_prepare_formats.py on the session's broker: it runs, and
both topics' documents come out whole and counted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kafeed.config import ConnectionSettings

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_prepare_formats.py"


def test_the_formats_benchmark_runs_and_both_topics_balance(kafka: ConnectionSettings) -> None:
    spec = importlib.util.spec_from_file_location("bench_prepare_formats", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.measure(kafka, 300, 1, partitions=1, batch_size=100, prefix="smoke-")
    (run,) = result["rounds"]
    for side in ("kafeed", "json"):
        assert run[side]["balanced"] and run[side]["documents_out"] == 300, run
        assert run[side]["dead_lettered"] == 0 and run[side]["records_per_s"] > 0
    assert result["median_ratio"] == run["ratio"] > 0
