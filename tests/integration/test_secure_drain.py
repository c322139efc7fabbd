"""On the secured cluster: a sink whose role may not read ends at once with one sentence, instead
of retrying the refusal for as long as it runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster
from kafeed.cli.main import main
from kafeed.topics import TopicAdmin, plan_topic


def test_archive_as_a_role_that_may_not_read_fails_at_once(
        secure_cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The ACLs name the default topics; the monitor role may describe `raw` but not read it.
    admin = secure_cluster.connection()
    TopicAdmin(admin).create(plan_topic("raw", brokers=1, partitions=2), exist_ok=True)
    # A record to archive, whatever ran before: on an empty topic a drain is done before it reads.
    from confluent_kafka import Producer

    producer = Producer(admin.client_config())
    for partition in (0, 1):
        producer.produce("raw", b"x", partition=partition)
    assert producer.flush(30) == 0
    started = time.monotonic()
    code = main(["archive", "--topic", "raw", "--table", "sec.denied", "--warehouse", str(tmp_path / "wh"),
                 "--until-caught-up", "--config", str(secure_cluster.client_file("monitor"))])
    took = time.monotonic() - started
    said = capsys.readouterr().err.strip()
    errors = [line for line in said.splitlines() if line.startswith("error: ")]
    assert code == 1 and len(errors) == 1, said
    first = errors[0]
    assert first.startswith("error: Could not archive 'raw' in group 'kafeed-archive.sec.denied': "), said
    assert "authorization failed" in first.lower() and "Traceback" not in said
    assert took < 60, f"the refusal was retried for {took:.0f} s"
