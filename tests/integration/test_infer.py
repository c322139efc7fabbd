"""`kafeed infer` on the real broker: a classifier trained here, served from a topic, switched mid-stream."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch

import kafeed.infer.stage as infer_stage
from kafeed.config import ConnectionSettings
from kafeed.infer import InferSettings, InferStats, load_served_model, run_infer
from kafeed.train.checkpoint import CheckpointManager
from kafeed.train.classifier import evaluate, train_classifier
from kafeed.train.options import TrainOptions
from tests.integration.train_data import paragraphs, produce_labelled, tiny_classifier
from tests.prepare_support import produce, read_topic


def test_infer_serves_a_trained_classifier_and_follows_a_newer_one(  # type: ignore[no-untyped-def]
        kafka: ConnectionSettings, make_topic, shakespeare: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = paragraphs(shakespeare)
    train_topic = make_topic(partitions=2)
    produce_labelled(kafka, train_topic, corpus[:200], [i % 2 for i in range(200)], partitions=2)
    ck = tmp_path / "ck"
    # The random-init encoder (no transformers import) and short inputs keep this quick.
    options = TrainOptions(model="classifier", topic=train_topic, steps=3, batch_size=8, max_length=24,
                           pretrained=False, checkpoint_dir=ck, checkpoint_every=0, log_every=3)
    train_classifier(options, kafka, progress=lambda _l: None)
    first = load_served_model(ck)

    # Serve 64 labelled records and 5 that are no sample; after the second batch a newer
    # checkpoint appears whose head always says 1, so its predictions are recognisable.
    source = make_topic(partitions=2)
    n = 64
    texts, labels = corpus[200:200 + n], [i % 2 for i in range(n)]
    produce_labelled(kafka, source, texts, labels, partitions=2)
    produce(kafka, source, [(f"bad{i}".encode(), b"\x0a\xff\xff", None) for i in range(5)])
    monkeypatch.setattr(infer_stage, "FOLLOW_EVERY_S", 0.0)
    saved: list[str] = []

    def newer_checkpoint(stats: InferStats) -> None:
        if stats.batches >= 2 and not saved:
            state = first.model.state_dict()
            state["head.bias"] = torch.tensor([-50.0, 50.0])
            manifest = json.loads(first.manifest_path.read_text())
            saved.append(str(CheckpointManager(ck, keep=5).save(first.step + 1, {"model": state},
                                                                  manifest={"config": manifest["config"]})))

    settings = InferSettings(input=source, output=f"{source}.pred", group=f"g-{source}", batch_size=8,
                             max_wait_ms=50, follow=ck, idle_s=1.0)
    stats = run_infer(settings, ck, kafka, until_caught_up=True, on_progress=newer_checkpoint)
    assert saved and stats.model_switches == 1
    assert stats.balanced and stats.records_in == n + 5 and stats.dead_letter_kinds == {"decode": 5}

    predictions = [json.loads(m.value()) for m in read_topic(kafka, settings.output)]
    ids = [p["id"] for p in predictions]
    assert sorted(ids) == sorted(f"s-{i}" for i in range(n)), "a prediction is missing or doubled"
    assert len(read_topic(kafka, settings.dlq_topic)) == 5

    second = load_served_model(ck)
    assert second.checkpoint_id != first.checkpoint_id
    by_model = Counter(p["checkpoint"] for p in predictions)
    assert set(by_model) == {first.checkpoint_id, second.checkpoint_id} and by_model == stats.by_checkpoint
    per_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for p in predictions:
        per_partition[p["input_partition"]].append(p)
        if p["checkpoint"] == second.checkpoint_id:  # the model it names is the one that made it
            assert p["label"] == 1 and p["scores"][1] > 0.99
    for rows in per_partition.values():  # switched between batches, once, never back
        names = [p["checkpoint"] for p in sorted(rows, key=lambda p: p["input_offset"])]
        assert names == sorted(names, key=lambda c: c == second.checkpoint_id)

    # The first model's predictions score what the trainer's evaluation scores on the same records.
    rows = [p for p in predictions if p["checkpoint"] == first.checkpoint_id]
    truth = {f"s-{i}": (texts[i], labels[i]) for i in range(n)}
    served_accuracy = sum(p["label"] == truth[p["id"]][1] for p in rows) / len(rows)
    offline, _majority = evaluate(first.model, first.encode, [truth[p["id"]][0] for p in rows],
                                  [truth[p["id"]][1] for p in rows])
    assert rows and offline == round(served_accuracy, 4)


@pytest.mark.slow  # every `kafeed infer` process imports torch: ~10 s each on a loaded machine
@pytest.mark.timeout(900)
def test_infer_is_exactly_once_under_kills(kafka: ConnectionSettings, make_topic, shakespeare: Path,  # type: ignore[no-untyped-def]
                                           tmp_path: Path) -> None:
    import random
    import signal
    import subprocess
    import sys
    import time

    from tests.prepare_support import high_watermarks, prepare_env

    corpus = paragraphs(shakespeare)
    ck = tiny_classifier(kafka, make_topic(partitions=2), corpus[:100], tmp_path / "ck")
    source = make_topic(partitions=2)
    n = 600
    produce_labelled(kafka, source, corpus[100:100 + n], [0] * n, partitions=2)
    output = f"{source}.pred"
    cmd = [sys.executable, "-m", "kafeed.cli.main", "infer", "-b", kafka.bootstrap, "--checkpoint", str(ck),
           "--input", source, "--output", output, "--group", f"g-{source}", "--batch-size", "8"]
    env = prepare_env(str(tmp_path))
    rng = random.Random(3)
    for k in range(2):
        target = int(n * (k + rng.random()) / 3)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 180
        while high_watermarks(kafka, output) < target:
            alive = proc.poll() is None and time.monotonic() < deadline
            assert alive, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    done = subprocess.run([*cmd, "--until-caught-up", "--json"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["balanced"]
    ids = [json.loads(m.value())["id"] for m in read_topic(kafka, output)]
    assert sorted(ids) == sorted(f"s-{i}" for i in range(n)), "a prediction is missing or doubled"
