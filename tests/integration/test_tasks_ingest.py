"""The built-in ``ingest-file`` task: two worker processes ingest a directory, one task per
file, and every record lands in the topic once."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.ingest.filetask import ingest_file, job_id_for_key
from kafeed.schema import decode_sample
from kafeed.tasks import QueueSettings, TaskContext, directory_tasks
from kafeed.tasks.results import ResultsView
from tests.integration.ingest_helpers import read_all
from tests.integration.test_tasks import _wait
from tests.integration.test_tasks_evaluate import _kafeed

FILES, LINES = 4, 60


def test_two_workers_ingest_a_directory_every_record_once(
        kafka: ConnectionSettings, make_topic: Any, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(partitions=3)
    data = tmp_path / "data"
    data.mkdir()
    for f in range(FILES):
        (data / f"part-{f}.jsonl").write_text("".join(
            json.dumps({"id": f"f{f}-{i}", "text": f"line {i} of file {f}"}) + "\n" for i in range(LINES)))
    prefix = f"in-{uuid.uuid4().hex[:8]}"
    errs = [tmp_path / f"worker{i}.err" for i in range(2)]
    workers = []
    for err in errs:
        with err.open("w") as sink:
            workers.append(_kafeed("tasks", "worker", "--kind", "ingest-file", "--prefix", prefix,
                                   "-b", kafka.bootstrap, stdout=subprocess.DEVNULL, stderr=sink))
    try:
        for err in errs:
            _wait(lambda err=err: "ready" in err.read_text(), f"worker ready ({err.name})")
        submit = ["tasks", "submit", "--kind", "ingest-file", "--dir", str(data), "--prefix", prefix,
                  "--params", json.dumps({"topic": topic}), "-b", kafka.bootstrap, "--json"]
        assert main(submit) == 0
        assert json.loads(capsys.readouterr().out)["submitted"] == FILES
        assert main(submit) == 0  # the directory submitted twice: the same keys, run once
        keys = [t.key for t in directory_tasks("ingest-file", data, {"topic": topic})]
        view = ResultsView(kafka, QueueSettings(prefix=prefix).results_topic).start()
        try:
            _wait(lambda: all((r := view.latest(k)) is not None and r.status in ("succeeded", "parked")
                              for k in keys), "a result per file", timeout=180)
            results = [view.latest(k) for k in keys]
        finally:
            view.close()
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        assert [w.wait(timeout=60) for w in workers] == [143, 143]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=30)

    assert all(r is not None and r.status == "succeeded" for r in results), \
        [r.error for r in results if r is not None] + [e.read_text()[-1500:] for e in errs]
    outputs = [r.output for r in results if r is not None]
    assert [o["job_id"] for o in outputs] == [job_id_for_key(k) for k in keys]
    # each file's job wrote its lines once, whichever run of the task did it
    assert sum(o["produced"] for o in outputs if not o["already_complete"]) == FILES * LINES
    # A task run again under its key (its worker died after ingesting, before the result was
    # written) is the same ingest job: already complete, nothing written twice.
    context = TaskContext(connection=kafka, kind="ingest-file", key=keys[0], attempt=2, worker="test",
                          stop=threading.Event())
    again = ingest_file({"path": str(data / "part-0.jsonl"), "topic": topic}, context)
    assert again["already_complete"] and again["produced"] == 0
    ids = Counter(decode_sample(r.value).id for r in read_all(kafka, topic))
    assert len(ids) == FILES * LINES and set(ids.values()) == {1}
