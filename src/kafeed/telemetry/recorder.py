"""Append periodic snapshots of the kafeed metrics to ``RUN_DIR/metrics.jsonl``.

One JSON object per line::

    {"time": 1764430000.5, "elapsed": 12.0,
     "metrics": {"kafeed_tokens_total": [{"labels": {"stage": "train"}, "value": 40960.0}], ...}}

Counters are running totals (``kafeed report`` turns them into rates);
histograms contribute their ``_sum`` and ``_count`` only, which is enough for a
mean and keeps lines short. ``extra`` figures passed to :meth:`record` land
under ``"extra"``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from prometheus_client import CollectorRegistry

from kafeed.telemetry.metrics import REGISTRY

log = logging.getLogger("kafeed")

METRICS_FILE = "metrics.jsonl"
#: Where evaluate tasks put their results for ``kafeed report`` (one JSON object per line).
EVALUATIONS_FILE = "evaluations.jsonl"


def snapshot(registry: CollectorRegistry = REGISTRY) -> dict[str, list[dict[str, Any]]]:
    """The current value of every sample in ``registry`` that has been touched."""
    out: dict[str, list[dict[str, Any]]] = {}
    for family in registry.collect():
        for sample in family.samples:
            name = sample.name
            if name.endswith(("_bucket", "_created")):
                continue
            out.setdefault(name, []).append({"labels": dict(sample.labels), "value": sample.value})
    return out


class MetricsRecorder:
    """Write a metrics snapshot every ``interval`` seconds from a daemon thread.

    Use as a context manager (``with MetricsRecorder(run_dir): ...``) or call
    :meth:`start` and :meth:`close`; :meth:`record` writes one line now.
    """

    def __init__(self, run_dir: Path, *, interval: float = 10.0,
                 registry: CollectorRegistry = REGISTRY) -> None:
        if interval <= 0:
            raise ValueError(f"The metrics interval must be positive, not {interval}.")
        self.path = Path(run_dir) / METRICS_FILE
        self.interval = interval
        self.registry = registry
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def record(self, **extra: float) -> None:
        """Append one snapshot now, with optional ``extra`` figures (e.g. ``loss=2.3``)."""
        line: dict[str, Any] = {
            "time": time.time(),
            "elapsed": round(time.monotonic() - self._start, 3),
            "metrics": snapshot(self.registry),
        }
        if extra:
            line["extra"] = extra
        text = json.dumps(line, separators=(",", ":")) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(text)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.record()
            except OSError as exc:  # a full disk must not stop training
                log.warning("could not append to %s: %s", self.path, exc)

    def start(self) -> MetricsRecorder:
        if self._thread is None:
            self.record()
            self._thread = threading.Thread(target=self._run, name="kafeed-metrics-recorder",
                                            daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop the thread and write a final snapshot."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.record()

    def __enter__(self) -> MetricsRecorder:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
