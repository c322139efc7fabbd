"""Longest work first under pytest-xdist, from what each test took last time.

A worker takes the next unit of work when it finishes one, so the run ends when the last
long test ends. Started last, a two-minute test adds its two minutes to the wall time;
started first, it overlaps everything else. So the units (a whole group of
``WHOLE_IN_ONE_PROCESS``, or one test) go out longest first.

Durations come from the last run here (``.pytest_cache/kafeed/durations.json``, written at
the end of every run) or, on a fresh clone, from ``tests/durations.json`` (the tests that
took longer than a few seconds, refreshed with ``make durations``). A test neither knows
keeps its place, after the known long ones.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

COMMITTED = Path(__file__).with_name("durations.json")
CACHE_KEY = "kafeed/durations"
KEEP_OVER_S = 3.0  # what tests/durations.json keeps


def known_durations(config: pytest.Config) -> dict[str, float]:
    """Seconds per test id: the committed table, overlaid by the last run here."""
    table: dict[str, float] = {}
    if COMMITTED.exists():
        table.update(json.loads(COMMITTED.read_text()))
    cache = getattr(config, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        table.update(cache.get(CACHE_KEY, {}))
    return table


def longest_first(items: list[pytest.Item], scope_of: Callable[[str], str],
                  durations: dict[str, float]) -> None:
    """Reorder ``items`` in place: units of work by their known total time, longest first;
    the items of one unit keep their order, unknown units keep theirs (a stable sort)."""
    totals: dict[str, float] = defaultdict(float)
    for item in items:
        totals[scope_of(item.nodeid)] += durations.get(item.nodeid, 0.0)
    items.sort(key=lambda item: -totals[scope_of(item.nodeid)])


class DurationLog:
    """Collects setup + call + teardown seconds per test id as reports arrive (on the
    xdist controller too) and stores them in pytest's cache at the end of the session."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration

    def store(self, config: pytest.Config) -> None:
        cache = getattr(config, "cache", None)
        if cache is None or not self.seconds or hasattr(config, "workerinput"):
            return
        table = dict(cache.get(CACHE_KEY, {}))
        table.update({k: round(v, 1) for k, v in self.seconds.items()})
        cache.set(CACHE_KEY, table)


def write_committed(cache_dir: Path = Path(".pytest_cache")) -> None:
    """``make durations``: the long tests of the last run here, into tests/durations.json."""
    stored = cache_dir / "v" / CACHE_KEY
    table: dict[str, float] = json.loads(stored.read_text()) if stored.exists() else {}
    long = {k: v for k, v in sorted(table.items()) if v > KEEP_OVER_S}
    COMMITTED.write_text(json.dumps(long, indent=0, sort_keys=True) + "\n")
    print(f"{len(long)} tests over {KEEP_OVER_S:g} s written to {COMMITTED}")


if __name__ == "__main__":
    write_committed()
