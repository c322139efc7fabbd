"""Render a run's ``metrics.jsonl`` to PNG charts and one self-contained HTML page.

Counters become rates between consecutive snapshots; gauges are drawn as
recorded. A chart without data is left out and named on the page. matplotlib
(the ``plot`` extra) is imported only here, with the Agg backend. When evaluate tasks
wrote ``evaluations.jsonl`` into the run directory, the ``evaluation`` chart draws their
held-out loss (and perplexity, or accuracy) by step beside the training loss.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafeed.errors import KafeedError
from kafeed.monitor.series import Series, counter_rates, extra_values, gauge_values, load_lines, ratio
from kafeed.telemetry.recorder import EVALUATIONS_FILE, METRICS_FILE

log = logging.getLogger("kafeed")

#: Every chart is this many pixels (width, height): FIG_INCHES x DPI.
FIG_INCHES = (10.0, 4.0)
DPI = 100

@dataclass(frozen=True)
class ReportResult:
    html: Path
    charts: list[Path]
    missing: list[str] = field(default_factory=list)
    evaluations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    panels: list[tuple[str, Callable[[list[dict[str, Any]]], Series]]]  # (y label, series maker)


CHARTS = [
    Chart("throughput", "Throughput", [
        ("records/s", lambda ls: counter_rates(ls, "kafeed_records_out_total", ("stage",))),
        ("tokens/s", lambda ls: counter_rates(ls, "kafeed_tokens_total", ("stage",))),
    ]),
    Chart("data_wait", "Data wait (share of wall time the consumer of batches waited)", [
        ("wait s / s", lambda ls: counter_rates(ls, "kafeed_data_wait_seconds_total", ("stage",))),
    ]),
    Chart("lag", "Consumer lag per partition", [
        ("messages", lambda ls: {
            **gauge_values(ls, "kafeed_consumer_lag", ("group", "topic", "partition")),
            **gauge_values(ls, "kafeed_client_consumer_lag", ("stage", "topic", "partition"))}),
    ]),
    Chart("loss", "Training loss", [
        ("loss", lambda ls: {**gauge_values(ls, "kafeed_train_loss", ("stage",)),
                             **extra_values(ls, "loss")}),
    ]),
    Chart("latency", "Mean end-to-end latency (record timestamp to trainer)", [
        ("seconds", lambda ls: ratio(
            counter_rates(ls, "kafeed_end_to_end_latency_seconds_sum", ("stage",)),
            counter_rates(ls, "kafeed_end_to_end_latency_seconds_count", ("stage",)))),
    ]),
]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise KafeedError("Plotting needs matplotlib, which is not installed.",
                          hint="Install the plot extra: pip install 'kafeed[plot]'.") from exc
    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    return plt


def _tight(fig: Any) -> None:
    """Tight margins, best effort: with many series (stages, topics) the legends can outgrow
    the fixed figure, and the chart is then drawn with matplotlib's default margins."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Tight layout not applied")
        fig.tight_layout()


def _draw(plt: Any, chart: Chart, data: list[Series], path: Path) -> None:
    fig, axes = plt.subplots(len(data), 1, figsize=FIG_INCHES, dpi=DPI, sharex=True, squeeze=False)
    for ax, (ylabel, _maker), series in zip(axes[:, 0], chart.panels, data, strict=True):
        for key, (xs, ys) in sorted(series.items()):
            ax.plot(xs, ys, label=key, linewidth=1.4)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if series:
            ax.legend(loc="best", fontsize="small")
    axes[0, 0].set_title(chart.title)
    axes[-1, 0].set_xlabel("seconds since the first snapshot")
    _tight(fig)
    fig.savefig(path, dpi=DPI)  # no bbox_inches: every PNG keeps its fixed pixel size
    plt.close(fig)


def read_evaluations(run_dir: Path) -> list[dict[str, Any]]:
    """``RUN_DIR/evaluations.jsonl``: one evaluation per step (the last written), by step.

    A task that ran twice (its worker died before the result was written) wrote its step
    twice; a line cut off by a crash is skipped."""
    path = Path(run_dir) / EVALUATIONS_FILE
    if not path.exists():
        return []
    by_step: dict[int, dict[str, Any]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            doc = json.loads(raw)
            by_step[int(doc["step"])] = doc
        except (ValueError, KeyError, TypeError):
            continue
    return [by_step[s] for s in sorted(by_step)]


def _train_loss_by_step(lines: list[dict[str, Any]], evaluations: list[dict[str, Any]]) -> Series:
    """Training loss by step: the snapshots' step and loss gauges, and each checkpoint's loss."""
    pts: dict[float, float] = {}
    for doc in lines:
        metrics = doc.get("metrics", {})
        step = [s["value"] for s in metrics.get("kafeed_train_step", [])]
        loss = [s["value"] for s in metrics.get("kafeed_train_loss", [])]
        if step and loss and step[0] > 0:
            pts[float(step[0])] = float(loss[0])
    for ev in evaluations:
        if ev.get("train_loss") is not None:
            pts[float(ev["step"])] = float(ev["train_loss"])
    xs = sorted(pts)
    return {"training loss": (xs, [pts[x] for x in xs])} if xs else {}


def _evaluation_chart(plt: Any, lines: list[dict[str, Any]], evaluations: list[dict[str, Any]],
                      path: Path) -> None:
    steps = [float(e["step"]) for e in evaluations]
    panels: list[tuple[str, Series]] = []
    loss: Series = _train_loss_by_step(lines, evaluations)
    if all(e.get("loss") is not None for e in evaluations):
        loss["held-out loss"] = (steps, [float(e["loss"]) for e in evaluations])
        panels.append(("loss", loss))
        panels.append(("perplexity", {"held-out perplexity": (
            steps, [float(e["perplexity"]) for e in evaluations])}))
    else:
        panels.append(("training loss", loss))
        panels.append(("accuracy", {
            "held-out accuracy": (steps, [float(e.get("accuracy") or 0.0) for e in evaluations]),
            "majority class": (steps, [float(e.get("majority_rate") or 0.0) for e in evaluations])}))
    fig, axes = plt.subplots(len(panels), 1, figsize=FIG_INCHES, dpi=DPI, sharex=True, squeeze=False)
    for ax, (ylabel, series) in zip(axes[:, 0], panels, strict=True):
        for key, (xs, ys) in sorted(series.items()):
            ax.plot(xs, ys, label=key, linewidth=1.4, marker="o" if key.startswith("held-out") else None)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if series:
            ax.legend(loc="best", fontsize="small")
    axes[0, 0].set_title("Evaluation of each checkpoint (held-out records) and training loss")
    axes[-1, 0].set_xlabel("step")
    _tight(fig)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _summary(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    last = lines[-1].get("metrics", {})
    duration = float(lines[-1]["time"]) - float(lines[0]["time"])
    rows = [("snapshots", str(len(lines))), ("duration", f"{duration:,.1f} s")]
    for name in ("kafeed_records_in_total", "kafeed_records_out_total", "kafeed_tokens_total",
                 "kafeed_batches_total", "kafeed_filtered_total", "kafeed_duplicates_total",
                 "kafeed_dead_lettered_total", "kafeed_produce_errors_total"):
        if name in last:
            rows.append((name, f"{sum(float(s['value']) for s in last[name]):,.0f}"))
    return rows


def render_report(run_dir: Path, *, out_dir: Path | None = None) -> ReportResult:
    """Write ``<chart>.png`` files and ``report.html`` (charts as base64 data URIs)."""
    lines = load_lines(Path(run_dir) / METRICS_FILE)
    out_dir = Path(out_dir or run_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plt = _pyplot()
    charts: list[Path] = []
    missing: list[str] = []
    sections: list[str] = []
    for chart in CHARTS:
        data = [maker(lines) for _ylabel, maker in chart.panels]
        if not any(data):
            missing.append(chart.name)
            continue
        path = out_dir / f"{chart.name}.png"
        _draw(plt, chart, data, path)
        charts.append(path)
        encoded = base64.b64encode(path.read_bytes()).decode()
        sections.append(f'<h2>{html.escape(chart.title)}</h2>\n'
                        f'<img alt="{chart.name}" src="data:image/png;base64,{encoded}">')
    evaluations = read_evaluations(Path(run_dir))
    if evaluations:
        path = out_dir / "evaluation.png"
        _evaluation_chart(plt, lines, evaluations, path)
        charts.append(path)
        encoded = base64.b64encode(path.read_bytes()).decode()
        sections.append('<h2>Evaluation</h2>\n'
                        f'<img alt="evaluation" src="data:image/png;base64,{encoded}">')
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in _summary(lines))
    note = (f"<p class=note>No data recorded for: {html.escape(', '.join(missing))}.</p>" if missing else "")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kafeed report: {html.escape(str(run_dir))}</title>
<style>body{{font-family:sans-serif;max-width:1040px;margin:2em auto}}img{{max-width:100%}}
th{{text-align:left;padding-right:2em}}.note{{color:#777}}</style></head>
<body><h1>kafeed run report</h1>
<p>{html.escape(str(run_dir))} · rendered {time.strftime('%Y-%m-%d %H:%M:%S')}</p>
<table>{rows}</table>
{note}
{chr(10).join(sections)}
</body></html>
"""
    page_path = out_dir / "report.html"
    page_path.write_text(page, encoding="utf-8")
    return ReportResult(page_path, charts, missing, evaluations)
