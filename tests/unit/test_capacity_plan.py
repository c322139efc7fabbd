"""`kafeed plan`'s arithmetic: pure, every limit visible."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafeed.cli.main import main
from kafeed.topics.capacity import Capacity, FleetRequest, plan_cluster

MONTH = 30 * 86400


def test_a_thousand_gpus() -> None:
    fleet = FleetRequest(gpus=1024, tokens_per_gpu_s=3000, bytes_per_token=2.2, retention_s=MONTH)
    plan = plan_cluster(fleet)
    assert plan["tokens_per_s"] == 3_072_000
    assert plan["partitions"] == 1024 and plan["partitions_per_reader"] == 1
    # 30 days of raw (4 B/token) + tokens (2.2 B/token), three copies: disk sets the broker count.
    assert plan["disk_total"] == pytest.approx(3_072_000 * 6.2 * MONTH * 3)
    assert plan["limited_by"] == "disk" and plan["brokers"] == 11
    assert plan["prepare_workers"] == 16


def test_overridden_figures_move_the_limit() -> None:
    fleet = FleetRequest(gpus=16384, tokens_per_gpu_s=3000, bytes_per_token=2.2, retention_s=86400)
    plan = plan_cluster(fleet, Capacity(broker_net_in_mb_s=20, readers_per_gpu=2))
    assert plan["limited_by"] == "network in" and plan["partitions"] == 32768
    few = plan_cluster(fleet, Capacity(max_partition_replicas=500))
    assert few["limited_by"] == "partition replicas"


@settings(max_examples=200, deadline=None)
@given(gpus=st.integers(1, 100_000), rate=st.floats(1, 1e6), bpt=st.floats(0.5, 8),
       days=st.integers(1, 365), replication=st.integers(1, 5), readers=st.integers(1, 8))
def test_every_limit_holds(gpus: int, rate: float, bpt: float, days: int, replication: int,
                           readers: int) -> None:
    c = Capacity(readers_per_gpu=readers)
    plan = plan_cluster(FleetRequest(gpus=gpus, tokens_per_gpu_s=rate, bytes_per_token=bpt,
                                     retention_s=days * 86400, replication=replication), c)
    b = plan["brokers"]
    assert b >= replication
    assert plan["network_in_per_s"] <= b * c.broker_net_in_mb_s * 1e6 * c.utilisation * (1 + 1e-9)
    assert plan["network_out_per_s"] <= b * c.broker_net_out_mb_s * 1e6 * c.utilisation * (1 + 1e-9)
    assert plan["disk_per_broker"] <= c.broker_disk_tb * 1e12 * c.utilisation * (1 + 1e-9)
    assert plan["partitions"] % plan["readers"] == 0  # every reader gets the same number
    assert plan["partitions"] * c.partition_mb_s * 1e6 >= plan["tokens_bytes_per_s"] * (1 - 1e-9)


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--gpus", "16384", "--tokens-per-gpu-s", "3000", "--bytes-per-token", "2.2",
                 "--retention", "30d", "--replication", "3", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["partitions"] == 16384 and plan["assumptions"]["replication"] == 3
