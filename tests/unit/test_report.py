"""`kafeed report` from a synthetic metrics.jsonl: charts exist, are PNGs of the right size, embedded."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path

import pytest

from kafeed.cli.main import main
from kafeed.errors import KafeedError
from kafeed.monitor.report import DPI, FIG_INCHES, render_report
from kafeed.monitor.series import counter_rates, load_lines

pytest.importorskip("matplotlib")


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def sample(value: float, **labels: str) -> dict[str, object]:
    return {"labels": labels, "value": value}


def write_run(run: Path, steps: int = 30) -> None:
    run.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(steps):
        t = 1_700_000_000.0 + 2.0 * i
        metrics = {
            "kafeed_records_out_total": [sample(1000.0 * i, stage="prepare", topic="tokens"),
                                         sample(900.0 * i, stage="ingest", topic="raw")],
            "kafeed_tokens_total": [sample(4096.0 * i * (1 + 0.1 * math.sin(i)), stage="train")],
            "kafeed_batches_total": [sample(8.0 * i, stage="train")],
            "kafeed_data_wait_seconds_total": [sample(0.1 * i + 0.02 * i * i / steps, stage="train")],
            "kafeed_consumer_lag": [sample(max(0.0, 500 - 20 * i + p * 50), group="g", topic="tokens",
                                           partition=str(p)) for p in range(3)],
            "kafeed_train_loss": [sample(4.0 * math.exp(-i / 10) + 1.0, stage="train")],
            "kafeed_end_to_end_latency_seconds_sum": [sample(0.5 * i, stage="train")],
            "kafeed_end_to_end_latency_seconds_count": [sample(10.0 * i, stage="train")],
        }
        lines.append(json.dumps({"time": t, "elapsed": 2.0 * i, "metrics": metrics}))
    lines.append('{"time": 17000')  # a write cut off by a crash: skipped
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_counter_rates_are_per_second(tmp_path: Path) -> None:
    write_run(tmp_path)
    rates = counter_rates(load_lines(tmp_path / "metrics.jsonl"), "kafeed_records_out_total", ("stage",))
    assert rates["prepare"][1][0] == pytest.approx(500.0)  # 1000 records per 2 s
    assert rates["ingest"][1][-1] == pytest.approx(450.0)


def test_report_renders_embedded_png_charts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run)
    result = render_report(run)
    names = sorted(p.stem for p in result.charts)
    assert names == ["data_wait", "lag", "latency", "loss", "throughput"]
    assert result.missing == []
    want = (int(FIG_INCHES[0] * DPI), int(FIG_INCHES[1] * DPI))
    for chart in result.charts:
        assert chart.stat().st_size > 5000, chart
        assert png_size(chart) == want
    page = result.html.read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(embedded) == 5
    assert "<img" in page and "http" not in page.split("<body>")[1]  # self-contained
    import base64

    assert base64.b64decode(embedded[0])[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_names_missing_charts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "bench"
    run.mkdir()
    lines = [{"time": 1.0 + i, "metrics": {"kafeed_records_out_total": [sample(10.0 * i, stage="ingest")]}}
             for i in range(5)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    assert main(["report", str(run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in doc["charts"]] == ["throughput.png"]
    assert doc["missing"] == ["data_wait", "lag", "loss", "latency"]
    assert "No data recorded for" in (run / "report.html").read_text()


def test_report_of_a_dir_without_metrics_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KafeedError, match=r"metrics\.jsonl"):
        render_report(tmp_path)
    assert main(["report", str(tmp_path)]) == 2  # a path without metrics is a usage error


def test_report_reads_what_the_recorder_writes(tmp_path: Path) -> None:
    from kafeed.telemetry import metrics as m
    from kafeed.telemetry.recorder import MetricsRecorder

    rec = MetricsRecorder(tmp_path, interval=60)
    for step in range(4):
        m.TOKENS.labels(stage="roundtrip").inc(1000)
        m.RECORDS_OUT.labels(stage="roundtrip", topic="t").inc(10)
        m.TRAIN_LOSS.labels(stage="roundtrip").set(3.0 - step)
        rec.record(loss=3.0 - step)
    result = render_report(tmp_path)
    assert {p.stem for p in result.charts} >= {"throughput", "loss"}
    lines = load_lines(tmp_path / "metrics.jsonl")
    rates = counter_rates(lines, "kafeed_tokens_total", ("stage",))
    assert len(rates["roundtrip"][1]) == 3 and all(r > 0 for r in rates["roundtrip"][1])


def test_evaluation_chart_draws_each_step_once_beside_training_loss(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run)
    evals = [{"step": s, "loss": 3.0 - 0.1 * s, "perplexity": math.exp(3.0 - 0.1 * s),
              "train_loss": 3.2 - 0.1 * s} for s in (10, 20, 30)]
    evals.insert(1, {**evals[1], "loss": 9.9})  # step 20 evaluated twice: the last line wins
    lines = [json.dumps(e) for e in evals] + ['{"step": 4']  # and a line cut off by a crash
    (run / "evaluations.jsonl").write_text("\n".join(lines) + "\n")
    result = render_report(run)
    chart = run / "evaluation.png"
    assert chart in result.charts and png_size(chart) == (int(FIG_INCHES[0] * DPI), int(FIG_INCHES[1] * DPI))
    assert [(e["step"], e["loss"]) for e in result.evaluations] == [(10, 2.0), (20, 1.0), (30, 0.0)]
    assert 'alt="evaluation"' in result.html.read_text()


def test_no_evaluations_no_evaluation_chart(tmp_path: Path) -> None:
    write_run(tmp_path)
    result = render_report(tmp_path)
    assert result.evaluations == [] and not (tmp_path / "evaluation.png").exists()


def test_a_chart_with_many_series_is_still_drawn(tmp_path: Path) -> None:
    """Sixty stages make legends taller than the figure: tight margins give up (a warning,
    an error in tests) and the chart is drawn with the default ones, at its fixed size."""
    from kafeed.monitor.report import CHARTS, _draw, _pyplot

    chart = CHARTS[0]
    many = {f"stage-{i}": ([0.0, 1.0], [float(i), float(i + 1)]) for i in range(60)}
    path = tmp_path / "many.png"
    _draw(_pyplot(), chart, [many for _ in chart.panels], path)
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    assert (width, height) == (round(FIG_INCHES[0] * DPI), round(FIG_INCHES[1] * DPI))
