"""A seconds-long run of every benchmark in benchmarks/ on the session's broker, so that a change
to what a benchmark calls fails here and not on the day someone measures with it. Each run uses
the smallest sizes its benchmark accepts and asserts the figures it came back with are whole.
(bench_prepare_formats.py has its own, tests/integration/test_bench_prepare_formats.py.)"""

from __future__ import annotations

import importlib
import math
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def bench(name: str) -> ModuleType:
    """Import benchmarks/<name>.py by its name: some import one another, and a spawned child of
    one finds its function again by the module's name."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


def fresh(admin: TopicAdmin, partitions: int = 1) -> str:
    name = f"smoke-{uuid.uuid4().hex[:8]}"
    admin.create(plan_topic(name, brokers=1, partitions=partitions))
    return name


def test_latency_sustained_rate_and_a_fresh_run(kafka: ConnectionSettings, admin: TopicAdmin) -> None:
    latency = bench("bench_latency")
    assert latency.sustained(kafka, fresh(admin), 64) > 0
    r = latency.run(kafka, fresh(admin), 200, 2.5, 0.02, 0)
    assert r["records"] > 0 and 0 < r["fill"] <= 1, r
    assert math.isfinite(r["p99"]) and r["p50"] <= r["p99"] <= r["max"], r
