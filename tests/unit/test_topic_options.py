"""`kafeed topic` refuses bad options and internal-topic deletions before the cluster is asked.

Every command points at a port that refuses connections: had the check come after
the network call, the exit code would be 1 (broker unavailable), not 2.
"""

from __future__ import annotations

import pytest

from kafeed.cli.main import main
from kafeed.ingest.progress import PROGRESS_TOPIC
from kafeed.prepare.settings import DedupSettings, PrepareSettings
from kafeed.topics import KAFKA_OWN_TOPICS, deletion_cost
from tests.cli_support import usage_error


@pytest.mark.parametrize(("options", "says"), [
    (["--partitions", "1000000"], "partitions: got 1000000, should be at most 10,000"),
    (["--partitions", "0"], "partitions: got 0, should be greater than or equal to 1"),
    (["--throughput-mbps", "nan"], "--throughput-mbps: got nan, should be a finite number"),
    (["--throughput-mbps", "inf"], "--throughput-mbps: got inf, should be a finite number"),
    (["--throughput-mbps", "-5"], "throughput_mbps: got -5.0, should be greater than 0"),
    (["--throughput-mbps", "0"], "throughput_mbps: got 0.0, should be greater than 0"),
    (["--throughput-mbps", "1e9"], "more than the 100,000 MB/s that 10,000 partitions"),
    (["--throughput-mbps", "1e300"], "more than the 100,000 MB/s that 10,000 partitions"),
    (["--throughput-mbps", "10", "--per-partition-mbps", "1e-300"], "throughput_mbps: got 10.0, more than"),
    (["--throughput-mbps", "10", "--per-partition-mbps", "nan"], "--per-partition-mbps: got nan"),
    (["--throughput-mbps", "10", "--per-partition-mbps", "0"], "per_partition_mbps: got 0.0"),
    (["--partitions", "1", "--replication", "0"], "replication: got 0"),
    (["--partitions", "1", "--replication", "2", "--min-isr", "3"],
     "min_insync_replicas: got 3, should be at most the replication factor (2)"),
    (["--partitions", "1", "--min-isr", "0"], "min_insync_replicas: got 0"),
    (["--partitions", "1", "--retention", "soon"], "retention: got 'soon', should be a time or size"),
    (["--partitions", "1", "--retention", "0ms"], "retention: got '0ms'"),
    (["--partitions", "1", "--throughput-mbps", "10"], "exactly one of --partitions or --throughput"),
    ([], "exactly one of --partitions or --throughput"),
])
def test_create_option_ranges(options: list[str], says: str, nowhere: str,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert says in usage_error(["topic", "create", "t", *options, "-b", nowhere], capsys)


@pytest.mark.parametrize("name", ["a[b]", "[bold]x[/bold]", ".", "x" * 250])
def test_bad_topic_names_print_literally(name: str, nowhere: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(["topic", "create", name, "--partitions", "1", "-b", nowhere], capsys)
    assert "name: got" in line
    assert repr(name)[:20] in line  # the name as given, brackets and all: never markup


@pytest.mark.parametrize(("name", "says"), [
    (PROGRESS_TOPIC, "re-send every record"),
    (DedupSettings().topic("g1"), "dedup changelog of the `kafeed prepare` group 'g1'"),
    (PrepareSettings(group="g1").repartition_topic, "the `kafeed prepare` group 'g1' from its route step"),
    ("__kafeed_something_new", "kafeed's internal topics"),
    ("__other_tool_state", "starts with '__'"),
])
def test_internal_topic_delete_needs_force(name: str, says: str, nowhere: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(["topic", "delete", name, "-b", nowhere], capsys)
    assert f"internal topic {name}" in line and says in line
    # with --force the refusal is gone: the command goes on to the (unreachable) cluster
    assert main(["topic", "delete", name, "--force", "-b", nowhere]) == 1
    assert "connection refused" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(KAFKA_OWN_TOPICS))
def test_kafkas_own_topics_refused_even_with_force(name: str, nowhere: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    line = usage_error(["topic", "delete", name, "--force", "-b", nowhere], capsys)
    assert f"Refusing to delete {name}: it" in line


def test_kafka_own_topic_hint_names_force(nowhere: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topic", "delete", "__consumer_offsets", "--force", "-b", nowhere]) == 2
    assert "not even --force" in capsys.readouterr().err


def test_ordinary_topics_cost_nothing() -> None:
    assert deletion_cost("raw") is None and deletion_cost("tokens.dlq") is None
    assert deletion_cost("_schemas") is None  # one underscore is not the internal mark
