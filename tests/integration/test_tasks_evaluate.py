"""The built-in ``evaluate`` task: `kafeed train --eval-every` submits one per checkpoint, a
worker process scores each on records the checkpoint did not train on, and `kafeed report`
draws the curve."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafeed.config import ConnectionSettings
from kafeed.signals import stop_request
from kafeed.tasks import QueueSettings
from kafeed.tasks.results import ResultsView
from kafeed.train.eval_tasks import eval_key, run_name
from kafeed.train.lineage import checkpoint_lineage
from tests.integration.test_tasks import _wait
from tests.integration.train_data import paragraphs, produce_documents

ROOT = Path(__file__).resolve().parents[2]


def _kafeed(*args: str, stdout: Any = subprocess.PIPE,
            stderr: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "kafeed.cli.main", *args], cwd=ROOT, env=env,
                            stdout=stdout, stderr=stderr, text=True)


def test_train_eval_every_evaluates_each_checkpoint_and_report_draws_it(
        kafka: ConnectionSettings, make_topic: Any, shakespeare: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(partitions=3)
    produce_documents(kafka, topic, paragraphs(shakespeare)[:400], partitions=3)
    prefix = f"ev-{uuid.uuid4().hex[:8]}"
    ckpt, run_dir = tmp_path / "ckpt", tmp_path / "run"
    err = tmp_path / "worker.err"
    with err.open("w") as sink:
        worker = _kafeed("tasks", "worker", "--kind", "evaluate", "--prefix", prefix, "--timeout", "30",
                         "-b", kafka.bootstrap, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        train = _kafeed("train", "--model", "gpt", "--topic", topic, "--steps", "6", "--batch-size", "4",
                        "--seq-len", "32", "--d-model", "32", "--n-layers", "1", "--n-heads", "2",
                        "--checkpoint-dir", str(ckpt), "--checkpoint-every", "0", "--keep", "10",
                        "--eval-every", "2", "--eval-records", "30", "--tasks-prefix", prefix,
                        "--run-dir", str(run_dir), "--seed", "1", "-b", kafka.bootstrap, "--json")
        out, train_err = train.communicate(timeout=240)
        assert train.returncode == 0, train_err[-3000:]
        assert json.loads(out)["steps"] == 6
        assert train_err.count("evaluate task") == 3, train_err[-3000:]

        run = run_name(ckpt)
        keys = {step: eval_key(run, step) for step in (2, 4, 6)}
        view = ResultsView(kafka, QueueSettings(prefix=prefix).results_topic).start()
        try:
            _wait(lambda: all((r := view.latest(k)) is not None and r.status in ("succeeded", "parked")
                              for k in keys.values()), "an evaluation result per checkpoint", timeout=180)
            results = {step: view.latest(key) for step, key in keys.items()}
        finally:
            view.close()
        assert all(r is not None and r.status == "succeeded" for r in results.values()), \
            {s: r.error for s, r in results.items() if r is not None} | {"worker": err.read_text()[-2000:]}
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 143
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)

    for step, result in results.items():
        assert result is not None
        output = result.output
        assert output["step"] == step and math.isfinite(output["loss"]) and output["windows"] >= 1
        assert output["perplexity"] == pytest.approx(math.exp(output["loss"]), rel=1e-3)
        # the held-out slice starts after everything this checkpoint trained on
        lineage = checkpoint_lineage(ckpt / f"step-{step:08d}.pt")
        for key, (start, end) in output["slice"].items():
            ranges = lineage["partitions"][key]["ranges"]
            assert start >= (ranges[-1][1] if ranges else 0) and end >= start
        assert sum(end - start for start, end in output["slice"].values()) >= output["held_out_records"] > 0

    from kafeed.cli.main import main

    try:
        assert main(["report", str(run_dir), "--json"]) == 0
    finally:
        stop_request().uninstall()
        stop_request().reset()
    report = json.loads(capsys.readouterr().out)
    assert (run_dir / "evaluation.png").stat().st_size > 0
    assert str(run_dir / "evaluation.png") in report["charts"]
    assert [e["step"] for e in report["evaluations"]] == [2, 4, 6]
    assert [e["loss"] for e in report["evaluations"]] == [results[s].output["loss"] for s in (2, 4, 6)]


def test_evaluate_a_classifier_checkpoint_on_the_held_out_tenth(
        kafka: ConnectionSettings, make_topic: Any, shakespeare: Path, tmp_path: Path) -> None:
    from kafeed.kafka import KafkaClients
    from kafeed.schema import decode_sample
    from kafeed.tasks import TaskContext
    from kafeed.train.classifier import held_out, train_classifier
    from kafeed.train.evaluate import evaluate
    from kafeed.train.options import TrainOptions
    from tests.integration.train_data import produce_labelled

    topic = make_topic(partitions=2)
    texts = paragraphs(shakespeare)[:300]
    produce_labelled(kafka, topic, texts, [i % 2 for i in range(300)], partitions=2)
    # the random encoder: no transformers import, the handler's path is the same
    options = TrainOptions(model="classifier", topic=topic, steps=3, batch_size=8, max_length=32,
                           checkpoint_dir=tmp_path / "ck", checkpoint_every=0, log_every=3,
                           pretrained=False)
    train_classifier(options, kafka, progress=lambda _line: None)
    stop_request().uninstall()
    stop_request().reset()
    context = TaskContext(connection=kafka, kind="evaluate", key="k", attempt=1, worker="test",
                          stop=threading.Event())
    out = evaluate({"checkpoint": str(tmp_path / "ck" / "step-00000003.pt"), "records": 1000,
                    "run_dir": str(tmp_path / "run")}, context)
    expected = sum(1 for m in KafkaClients(kafka).read_to_end(topic) if held_out(decode_sample(m.value()).id))
    assert out["step"] == 3 and out["held_out_records"] == expected > 0
    assert 0.0 <= out["accuracy"] <= 1.0 and 0.5 <= out["majority_rate"] <= 1.0
    assert json.loads((tmp_path / "run" / "evaluations.jsonl").read_text())["accuracy"] == out["accuracy"]
