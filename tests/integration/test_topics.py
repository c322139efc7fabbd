from __future__ import annotations

import json
import time
import uuid

import pytest

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.topics import TopicAdmin, plan_topic


def test_throughput_plan_on_real_broker(kafka: ConnectionSettings, admin: TopicAdmin,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["topic", "create", "planned-100mbps", "--throughput-mbps", "100",
               "--per-partition-mbps", "10", "--retention", "1d", "-b", kafka.bootstrap, "--json"])
    assert rc == 0
    created = json.loads(capsys.readouterr().out)
    assert created["partitions"] == 10 and created["replication"] == 1
    info = admin.describe("planned-100mbps")
    assert len(info.partitions) == 10
    assert info.configs["retention.ms"] == "86400000"
    assert info.configs["compression.type"] == "zstd"


def test_create_list_describe_delete(kafka: ConnectionSettings, make_topic, admin: TopicAdmin,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    name = make_topic(partitions=3)
    assert name in admin.list()
    assert main(["topic", "describe", name, "-b", kafka.bootstrap, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [p["partition"] for p in info["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["high_watermark"] == 0 for p in info["partitions"])
    # creating again fails in one sentence, unless told it may exist
    assert main(["topic", "create", name, "--partitions", "3", "-b", kafka.bootstrap]) == 1
    assert "already exists" in capsys.readouterr().err
    assert main(["topic", "create", name, "--partitions", "3", "--if-not-exists",
                 "-b", kafka.bootstrap]) == 0
    # An existing topic is reported as it is, not as this command asked for it.
    capsys.readouterr()
    asked_12 = ["topic", "create", name, "--partitions", "12", "--if-not-exists", "-b", kafka.bootstrap]
    assert main([*asked_12, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["created"], got["partitions"], got["requested"]["partitions"]) == (False, 3, 12)
    assert main(asked_12) == 0
    printed = capsys.readouterr()
    assert "3 partition(s)" in printed.out and "12" not in printed.out
    assert "not as asked (partitions 12)" in printed.err
    assert main(["topic", "delete", name, "-b", kafka.bootstrap]) == 0
    with pytest.raises(TopicError, match="does not exist"):
        admin.describe(name)


def test_describe_sizes_and_watermarks(kafka: ConnectionSettings, make_topic,
                                       admin: TopicAdmin) -> None:
    from confluent_kafka import Producer

    name = make_topic(partitions=2)
    producer = Producer(kafka.client_config())
    for i in range(100):
        producer.produce(name, value=b"x" * 1000, partition=i % 2)
    assert producer.flush(10) == 0
    info = admin.describe(name)
    assert [p.high_watermark for p in info.partitions] == [50, 50]
    assert all((p.size_bytes or 0) > 0 for p in info.partitions)


def test_unreachable_cluster_is_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.monotonic()
    assert main(["topic", "list", "-b", "127.0.0.1:1"]) == 1
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert "no Kafka broker answered at 127.0.0.1:1 (connection refused)" in err
    assert "Traceback" not in err
    assert elapsed < 10, elapsed  # librdkafka alone took 11-18 s to give up


def _wait_gone(admin: TopicAdmin, name: str, timeout: float = 30.0) -> bool:
    """Deletion is asynchronous in the metadata: wait until the topic is no longer listed."""
    deadline = time.monotonic() + timeout
    while admin.exists(name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_internal_topic_delete_needs_force(kafka: ConnectionSettings, admin: TopicAdmin,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    name = f"__kafeed_dedup_test-{uuid.uuid4().hex[:8]}"
    admin.create(plan_topic(name, brokers=1, partitions=1, compact=True))
    assert main(["topic", "delete", name, "-b", kafka.bootstrap]) == 2
    err = capsys.readouterr().err
    assert "dedup changelog" in err and "--force" in err and "Traceback" not in err
    assert admin.exists(name)
    assert main(["topic", "delete", name, "--force", "-b", kafka.bootstrap]) == 0
    assert f"Deleted topic {name}." in capsys.readouterr().out
    assert _wait_gone(admin, name)


def test_deleting_a_missing_topic_says_so(kafka: ConnectionSettings,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    name = f"never-created-{uuid.uuid4().hex[:8]}"
    assert main(["topic", "delete", name, "-b", kafka.bootstrap]) == 1
    err = capsys.readouterr().err
    assert f"Topic '{name}' does not exist" in err and "Traceback" not in err


def test_create_refuses_bad_options_before_asking(kafka: ConnectionSettings, admin: TopicAdmin,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    name = f"too-many-{uuid.uuid4().hex[:8]}"
    assert main(["topic", "create", name, "--partitions", "1000000", "-b", kafka.bootstrap]) == 2
    assert "partitions: got 1000000" in capsys.readouterr().err
    assert not admin.exists(name)


def test_topic_list_piped_is_one_name_per_line(kafka: ConnectionSettings, admin: TopicAdmin,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from kafeed.topics import topic_request

    long_name = "site-a.site-b." + uuid.uuid4().hex + "-" + "x" * 120
    admin.create(topic_request(long_name, partitions=1).plan(brokers=1))
    try:
        assert main(["topic", "list", "-b", kafka.bootstrap]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert long_name in lines
        assert all(line == line.strip() and " " not in line for line in lines)
    finally:
        admin.delete(long_name)
