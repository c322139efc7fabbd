"""Real-broker fixtures: one local cluster per test session, a fresh topic per test.

The cluster runs on free ports in a temporary directory, so it never collides
with a demo cluster, and is stopped at the end of the session even when tests fail.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.errors import BrokerError
from kafeed.topics import TopicAdmin, plan_topic


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # A slow JVM start on a busy machine gets three minutes; a start that fails anyway
    # (a port taken between its pick and the broker's bind) gets one more try on fresh
    # ports, the first failure printed to the test's output.
    cluster = LocalCluster(tmp_path_factory.mktemp("kafka"), nodes=1, port=free_port_block(2),
                           heap_mb=768, jit="quick")
    try:
        cluster.start(timeout=180)
    except BrokerError as first:
        print(f"The session broker did not start; trying again on other ports: {first}")
        cluster = LocalCluster(tmp_path_factory.mktemp("kafka"), nodes=1, port=free_port_block(2),
                               heap_mb=768, jit="quick")
        cluster.start(timeout=180)
    try:
        yield cluster
    finally:
        cluster.stop(timeout=15, purge=True)


@pytest.fixture(scope="session")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One secured node (SASL_SSL + SCRAM-SHA-512, ACLs per role) for the whole session.

    Expensive to start; every secured test shares it. Its role settings files are
    ``secure_cluster.client_file(role)``; the default topic names (raw, tokens) are
    the ones the role ACLs name, so tests that need them use them.
    """
    cluster = LocalCluster(tmp_path_factory.mktemp("kafka-secure"), nodes=1, secure=True,
                           port=free_port_block(3), heap_mb=512, jit="quick")
    cluster.start(timeout=180)
    try:
        yield cluster
    finally:
        cluster.stop(timeout=15, purge=True)


@pytest.fixture(scope="session")
def kafka(kafka_cluster: LocalCluster) -> ConnectionSettings:
    """Connection settings for the session's cluster."""
    return ConnectionSettings(bootstrap=kafka_cluster.bootstrap)


@pytest.fixture(scope="session")
def admin(kafka: ConnectionSettings) -> TopicAdmin:
    return TopicAdmin(kafka)


TopicFactory = Callable[..., str]


@pytest.fixture
def make_topic(admin: TopicAdmin, request: pytest.FixtureRequest) -> TopicFactory:
    """Create a fresh uniquely named topic: ``make_topic(partitions=3, **plan_kwargs)``."""

    def factory(partitions: int = 1, *, prefix: str | None = None, **kwargs: object) -> str:
        base = (prefix or request.node.name)[:40]
        name = "".join(c if c.isalnum() or c in "._-" else "-" for c in base)
        name = f"{name}-{uuid.uuid4().hex[:8]}"
        admin.create(plan_topic(name, brokers=1, partitions=partitions, **kwargs))  # type: ignore[arg-type]
        return name

    return factory


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    return tmp_path
