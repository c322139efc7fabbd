from __future__ import annotations

import pytest

from kafeed.errors import ConfigError
from kafeed.topics import parse_retention, partitions_for, plan_topic


def test_throughput_sets_partitions() -> None:
    plan = plan_topic("t", brokers=3, throughput_mbps=100, per_partition_mbps=10)
    assert plan.partitions == 10


@pytest.mark.parametrize(("mbps", "per", "expected"), [(1, 10, 1), (10.5, 10, 2), (30, 10, 3),
                                                        (0.01, 50, 1), (99.999, 10, 10)])
def test_partitions_round_up(mbps: float, per: float, expected: int) -> None:
    assert partitions_for(mbps, per) == expected


def test_replication_defaults_follow_brokers() -> None:
    one = plan_topic("t", brokers=1, partitions=2)
    three = plan_topic("t", brokers=5, partitions=2)
    assert (one.replication, one.min_insync_replicas) == (1, 1)
    assert (three.replication, three.min_insync_replicas) == (3, 2)


def test_replication_beyond_brokers_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs 3 brokers"):
        plan_topic("t", brokers=1, partitions=1, replication=3)


def test_exactly_one_sizing_input() -> None:
    with pytest.raises(ConfigError):
        plan_topic("t", brokers=1)
    with pytest.raises(ConfigError):
        plan_topic("t", brokers=1, partitions=3, throughput_mbps=10)


@pytest.mark.parametrize(("text", "expected"), [
    ("7d", (7 * 86_400_000, None)), ("12h", (43_200_000, None)), ("500ms", (500, None)),
    ("10GiB", (None, 10 * 1024**3)), ("200MB", (None, 200_000_000)), ("infinite", (-1, None)),
])
def test_retention_parsing(text: str, expected: tuple[int | None, int | None]) -> None:
    assert parse_retention(text) == expected


def test_retention_garbage() -> None:
    with pytest.raises(ConfigError, match="neither a time nor a size"):
        parse_retention("soon")


def test_plan_configs() -> None:
    plan = plan_topic("t", brokers=3, partitions=1, compression="lz4", retention="1d", compact=True)
    conf = plan.configs()
    assert conf == {"min.insync.replicas": "2", "compression.type": "lz4",
                    "cleanup.policy": "compact", "retention.ms": "86400000"}


def test_bad_topic_name() -> None:
    with pytest.raises(ConfigError):
        plan_topic("bad name!", brokers=1, partitions=1)
