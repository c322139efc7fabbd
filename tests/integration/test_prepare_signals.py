"""Stopping prepare: SIGTERM → 143 with the summary; a re-run finishes every document exactly once.

Also: a run that dead-letters everything it read (or more than --max-dlq-ratio) exits 1.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.signals import stop_request
from tests.prepare_support import (
    document_ids,
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    sample_record,
    watermark_consumer,
)


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    """main() installs the process's stop handler; give the signals back after each test."""
    yield
    stop_request().uninstall()
    stop_request().reset()


def test_sigterm_exits_143_and_a_rerun_finishes_exactly_once(kafka: ConnectionSettings, make_topic,  # type: ignore[no-untyped-def]
                                                             tmp_path: Path) -> None:
    raw = make_topic(partitions=2)
    # Enough that the stop lands mid-run on a fast machine: quiet, the first run committed
    # 140-240 of 3,000 before the SIGTERM took; beside a CPU hog it once committed all 3,000.
    n = 6000
    produce(kafka, raw, [sample_record(t) for t in paragraphs(n)])
    output = f"{raw}.tokens"
    cmd = prepare_command(kafka.bootstrap, raw, output, f"g-{raw}", "--batch-size", "20", "--json")
    env = prepare_env(str(tmp_path))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch = watermark_consumer(kafka)
    try:
        deadline = time.monotonic() + 120
        # Readiness: a committed batch is visible on the output topic.
        while high_watermarks(kafka, output, watch) < 20:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "prepare never committed a batch"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        watch.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, stderr
    message = " ".join(stderr.split())
    assert "Stopped by SIGTERM: the work committed so far is kept." in message
    assert "the group resumes" in message
    first = json.loads(stdout)
    assert first["balanced"] and 0 < first["records_in"] < n

    rerun = subprocess.run([*cmd, "--until-caught-up"], env=env, capture_output=True, text=True,
                           timeout=240, check=False)
    assert rerun.returncode == 0, rerun.stderr
    second = json.loads(rerun.stdout)
    assert first["records_in"] + second["records_in"] == n
    ids = document_ids(read_topic(kafka, output))
    assert len(ids) == len(set(ids)) == n


@pytest.mark.parametrize(("ratio", "code"), [(None, 1), ("0.5", 0), ("0.2", 1)])
def test_dead_letter_share_decides_the_exit_code(kafka: ConnectionSettings, make_topic, capsys,  # type: ignore[no-untyped-def]
                                                 tmp_path: Path, monkeypatch, ratio: str | None,
                                                 code: int) -> None:
    from kafeed.cli.main import main

    monkeypatch.setenv("KAFEED_HOME", str(tmp_path))
    raw = make_topic(partitions=1)
    garbage = [(b"bad%d" % i, b"\xff\xff\xff", None) for i in range(3)]
    good = [sample_record(t) for t in paragraphs(7)] if ratio is not None else []
    produce(kafka, raw, garbage + good)
    args = ["prepare", "-b", kafka.bootstrap, "-i", raw, "-o", f"{raw}.tokens", "-g", f"g-{raw}",
            "--until-caught-up", "--json"]
    if ratio is not None:
        args += ["--max-dlq-ratio", ratio]
    assert main(args) == code
    captured = capsys.readouterr()
    assert json.loads(captured.out)["dead_lettered"] == 3  # the summary is printed either way
    err = " ".join(captured.err.split())
    if ratio is None:
        assert f"error: prepare: every one of the 3 records read went to {raw}.dlq." in err
    elif code:
        assert "3 of 10 records (30.0%) went to" in err and "--max-dlq-ratio 0.2" in err
    else:
        assert "error" not in err
    assert len(read_topic(kafka, f"{raw}.dlq")) == 3


def test_out_of_range_options_are_usage_errors(kafka: ConnectionSettings, capsys) -> None:  # type: ignore[no-untyped-def]
    from kafeed.cli.main import main

    assert main(["prepare", "-b", kafka.bootstrap, "--max-dlq-ratio", "-0.1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "max_dlq_ratio" in err and "Traceback" not in err
