"""A run's ``metrics.jsonl`` as series to draw: each a legend label -> (seconds since the
first snapshot, values), for kafeed.monitor.report. Counters become rates between
consecutive snapshots; gauges are taken as recorded."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError, KafeedError

log = logging.getLogger("kafeed")

Series = dict[str, tuple[list[float], list[float]]]  # legend label -> (x seconds, y)


def load_lines(path: Path) -> list[dict[str, Any]]:
    """The snapshots in ``path``, oldest first; malformed lines (a cut-off last write) skipped."""
    if not path.exists():
        raise ConfigError(f"{path} does not exist.",
                          hint="Pass a run directory written with a MetricsRecorder (metrics.jsonl).")
    lines: list[dict[str, Any]] = []
    bad = 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
            float(doc["time"])
            lines.append(doc)
        except (ValueError, KeyError, TypeError):
            bad += 1
    if bad:
        log.warning("skipped %d malformed line(s) in %s", bad, path)
    if not lines:
        raise KafeedError(f"{path} holds no metrics snapshots.")
    return sorted(lines, key=lambda d: float(d["time"]))


def _label(labels: dict[str, str], keys: tuple[str, ...]) -> str:
    return " ".join(str(labels.get(k, "")) for k in keys).strip() or "all"


def gauge_values(lines: list[dict[str, Any]], name: str, keys: tuple[str, ...]) -> Series:
    t0 = float(lines[0]["time"])
    out: Series = {}
    for doc in lines:
        sums: dict[str, float] = {}
        for sample in doc.get("metrics", {}).get(name, []):
            key = _label(sample.get("labels", {}), keys)
            sums[key] = sums.get(key, 0.0) + float(sample["value"])
        for key, value in sums.items():
            xs, ys = out.setdefault(key, ([], []))
            xs.append(float(doc["time"]) - t0)
            ys.append(value)
    return out


def counter_rates(lines: list[dict[str, Any]], name: str, keys: tuple[str, ...]) -> Series:
    """Per-second rate of a counter between consecutive snapshots, by the ``keys`` labels."""
    out: Series = {}
    for key, (xs, ys) in gauge_values(lines, name, keys).items():
        rx, ry = [], []
        for i in range(1, len(xs)):
            dt = xs[i] - xs[i - 1]
            if dt > 0:
                rx.append(xs[i])
                ry.append(max(0.0, ys[i] - ys[i - 1]) / dt)  # a restart resets a counter
        if rx:
            out[key] = (rx, ry)
    return out


def ratio(num: Series, den: Series) -> Series:
    out: Series = {}
    for key, (xs, ys) in num.items():
        if key in den:
            dmap = dict(zip(*den[key], strict=True))
            pts = [(x, y / dmap[x]) for x, y in zip(xs, ys, strict=True) if dmap.get(x)]
            if pts:
                out[key] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def extra_values(lines: list[dict[str, Any]], key: str) -> Series:
    t0 = float(lines[0]["time"])
    pts = [(float(d["time"]) - t0, float(d["extra"][key])) for d in lines
           if isinstance(d.get("extra"), dict) and key in d["extra"]]
    return {key: ([p[0] for p in pts], [p[1] for p in pts])} if pts else {}
