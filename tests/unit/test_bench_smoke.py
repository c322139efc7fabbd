"""A seconds-long run of the benchmarks in benchmarks/ that need no broker (the others run in
tests/integration/test_bench_smoke.py), so that a change to what one calls fails here."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def bench(name: str) -> ModuleType:
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)


@pytest.mark.parametrize("kind", ["kafka", "files"])
def test_reader_reads_every_record_of_either_source(kind: str, tmp_path: Path) -> None:
    reader = bench("bench_reader")
    got = reader.child(kind, {"records": 40, "doc_tokens": 256, "reads": 1, "dir": str(tmp_path)})
    assert got["ns_record"] > 0 and got["ns_token"] > 0, got
    assert got["ns_record"] > 100 * got["ns_token"], got  # a record holds 256 tokens
