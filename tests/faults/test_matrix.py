"""The fault matrix: every stage under every fault, through one harness (tests/faults/harness.py).

The default run is the few cells of DEFAULT below (why those, there); the whole
cross product is `pytest -m slow tests/faults/test_matrix.py` (numbers in docs/faults.md).
Cells that would repeat another cell are skipped with the reason (NOT_MEANINGFUL).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from tests.faults.harness import FAULTS, run_cell
from tests.faults.stages import STAGES, Place

# The default run: the two defects this matrix was built for (a drain right after a kill, a
# trainer killed while its workers start) and a broker restart under a share-group worker
# (whose hang under load was a lease renewal written after a success, docs/faults.md). A
# plain kill of ingest, leader kills, SIGTERM and infer run in their own default tests
# (test_ingest_faults.py, test_three_nodes.py, test_ingest_signals.py, test_infer_workers.py),
# and the stream core's clients reconnecting after a broker restart in prepare's own slow
# cell; the slow run puts every stage under every fault.
DEFAULT = {
    ("prepare", "sigkill-drain"),
    ("tasks", "broker-restart"),
    ("loader", "sigkill-startup"),
}

NOT_MEANINGFUL = {
    ("ingest", "sigkill-drain"): "ingest's drain is its re-run, so this is the sigkill cell",
    ("loader", "sigkill-drain"): "the trainer's drain is its re-run, so this is the sigkill cell",
    ("tasks", "sigkill-drain"): "a tasks worker has no drain; its restart is the sigkill cell",
}


def _cells() -> Iterator[Any]:
    for stage, fault in itertools.product(STAGES, FAULTS):
        marks: list[Any] = []
        if (stage, fault) in NOT_MEANINGFUL:
            marks.append(pytest.mark.skip(reason=NOT_MEANINGFUL[(stage, fault)]))
        elif (stage, fault) not in DEFAULT:
            marks.append(pytest.mark.slow)
        yield pytest.param(stage, fault, id=f"{stage}-{fault}", marks=marks)


def _cluster(path: Path, nodes: int) -> Iterator[LocalCluster]:
    cluster = LocalCluster(path, nodes=nodes, port=free_port_block(2 * nodes),
                           heap_mb=384 if nodes > 1 else 512, jit="quick")
    cluster.start(timeout=180)
    try:
        yield cluster
    finally:
        cluster.stop(timeout=15, purge=True)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three nodes whose partition leaders the leader-kill cells kill."""
    yield from _cluster(tmp_path_factory.mktemp("matrix-three"), 3)


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One node of the matrix's own, which the broker-restart cells stop and start."""
    yield from _cluster(tmp_path_factory.mktemp("matrix-restart"), 1)


@pytest.fixture(scope="module")
def classifier(kafka: ConnectionSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The infer cells' checkpoint, trained on first use."""
    made: list[Path] = []

    def get() -> Path:
        if not made:
            from tests.integration.train_data import tiny_classifier
            from tests.prepare_support import paragraphs

            topic = f"matrix-train-{uuid.uuid4().hex[:8]}"
            from kafeed.topics import TopicAdmin, plan_topic

            TopicAdmin(kafka).create(plan_topic(topic, brokers=1, partitions=2))
            made.append(tiny_classifier(kafka, topic, paragraphs(40, seed="train"),
                                        tmp_path_factory.mktemp("classifier")))
        return made[0]

    yield get


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("stage", "fault"), list(_cells()))
def test_cell(stage: str, fault: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    kind = FAULTS[fault].cluster
    cluster: LocalCluster | None = request.getfixturevalue(kind) if kind else None
    kafka = ConnectionSettings(bootstrap=cluster.bootstrap) if cluster else request.getfixturevalue("kafka")
    # The classifier (and the session's broker it trains on) only when an infer cell asks for it:
    # a cell on a cluster of its own, run alone, would otherwise start that broker for nothing.
    place = Place(kafka=kafka, brokers=3 if kind == "three" else 1, work=tmp_path,
                  name=f"m-{stage}-{fault}-{uuid.uuid4().hex[:6]}",
                  classifier=lambda: request.getfixturevalue("classifier")())
    run_cell(STAGES[stage](place), FAULTS[fault], cluster)
