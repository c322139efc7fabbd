"""Drains (`--until-caught-up`) mean the whole input, whichever member holds it.

A drain started right after a SIGKILL, while the dead member still holds partitions in the
group, takes them over after the group's session timeout and processes every record of every
partition exactly once; one held by a live member that commits nothing fails with one sentence
naming the partitions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, DrainIncomplete
from kafeed.kafka import SESSION_TIMEOUT_MS
from kafeed.prepare import PrepareSettings, run_prepare
from tests.integration.archive_support import settings, table_keys, topic_records
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory
from tests.prepare_support import (
    document_ids,
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    sample_record,
    start_and_kill,
)

SESSION_S = SESSION_TIMEOUT_MS / 1000
# A drain right after a kill waits out the dead member's session once, then reads the rest;
# the interpreter start and the reading get a session timeout of their own on a loaded machine.
DRAIN_AFTER_KILL_S = 2 * SESSION_S + 15
READY_S = 120


def _archive_command(kafka: ConnectionSettings, topic: str, warehouse: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kafeed.cli.main", "archive", "--bootstrap", kafka.bootstrap,
            "--topic", topic, "--table", "arch.t", "--warehouse", str(warehouse), "--group", f"g-{topic}",
            "--flush-interval", "0.2", *extra]


def _archived(warehouse: Path) -> int:
    try:
        return len(table_keys(warehouse))
    except ConfigError:  # the table is not created yet
        return 0


def _drain(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([*command, "--until-caught-up", "--json"], env=env, capture_output=True,
                          text=True, timeout=240)
    return done, time.monotonic() - started


def _kill_then_drain(stage: str, command: list[str], env: dict[str, str], kills: int,
                     produce_round: Callable[[int], None], progress: Callable[[], int],
                     check: Callable[[subprocess.CompletedProcess[str]], None]) -> None:
    """Produce a round and SIGKILL ``command`` once ``progress()`` grew, ``kills`` times; then
    produce a last round, drain, ``check`` what the drain did and that it was quick."""
    for k in range(kills):
        produce_round(k)
        before = progress()
        start_and_kill(command, env, lambda: progress() > before)  # noqa: B023
    # Records the dead member's partitions get after it died: only a drain that takes those
    # partitions over processes them.
    produce_round(kills)
    done, took = _drain(command, env)
    assert done.returncode == 0, done.stderr
    check(done)
    assert took < DRAIN_AFTER_KILL_S, f"the drain took {took:.1f} s"
    print(f"{stage} drain after {kills} kill(s): {took:.1f} s")


def _archive_kills(kafka: ConnectionSettings, topic: str, tmp_path: Path, kills: int, per_round: int) -> None:
    warehouse = tmp_path / "wh"

    def produce_round(k: int) -> None:
        produce_docs(kafka.bootstrap, topic, per_round, first=k * per_round, seed=k * per_round)

    def check(_: subprocess.CompletedProcess[str]) -> None:
        keys = table_keys(warehouse)
        assert len(keys) == len(set(keys)), "a record was archived twice"
        assert set(keys) == set(topic_records(kafka, topic)), "a record was not archived"
        assert len(keys) == (kills + 1) * per_round

    command = _archive_command(kafka, topic, warehouse)
    _kill_then_drain("archive", command, prepare_env(str(tmp_path / "home")), kills, produce_round,
                     lambda: _archived(warehouse), check)


def _prepare_kills(kafka: ConnectionSettings, raw: str, tmp_path: Path, kills: int, per_round: int) -> None:
    output = f"{raw}.tokens"
    texts = paragraphs(per_round * (kills + 1))

    def produce_round(k: int) -> None:
        produce(kafka, raw, [sample_record(t) for t in texts[k * per_round:(k + 1) * per_round]])

    def check(done: subprocess.CompletedProcess[str]) -> None:
        assert json.loads(done.stdout)["balanced"]
        ids = document_ids(read_topic(kafka, output))
        assert len(ids) == len(set(ids)), "a document was prepared twice"
        assert len(ids) == len(texts), "a document was not prepared"

    command = prepare_command(kafka.bootstrap, raw, output, f"g-{raw}", "--batch-size", "20")
    _kill_then_drain("prepare", command, prepare_env(str(tmp_path)), kills, produce_round,
                     lambda: high_watermarks(kafka, output), check)


_KILLS = {"archive": _archive_kills, "prepare": _prepare_kills}


@pytest.mark.parametrize(("stage", "per_round"), [("archive", 1500), ("prepare", 600)])
def test_drain_right_after_a_kill_takes_every_partition(stage: str, per_round: int, kafka: ConnectionSettings,
                                                        make_topic: TopicFactory, tmp_path: Path) -> None:
    _KILLS[stage](kafka, make_topic(partitions=3), tmp_path, kills=1, per_round=per_round)


@pytest.mark.slow
@pytest.mark.parametrize(("stage", "kills", "per_round"), [("archive", 5, 2000), ("prepare", 4, 600)])
def test_drain_after_many_kills(stage: str, kills: int, per_round: int, kafka: ConnectionSettings,
                                make_topic: TopicFactory, tmp_path: Path) -> None:
    _KILLS[stage](kafka, make_topic(partitions=3), tmp_path, kills=kills, per_round=per_round)


def _committed_to_end(kafka: ConnectionSettings, topic: str, group: str, partitions: set[int]) -> bool:
    """Whether ``group`` has committed each of ``partitions`` up to its high watermark."""
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, p) for p in sorted(partitions)], timeout=10)
        return all(tp.offset >= c.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10)[1]
                   for tp in committed)
    finally:
        c.close()


class Holder:
    """A live member of ``group`` that takes its share of ``topic``'s partitions and commits nothing."""

    def __init__(self, kafka: ConnectionSettings, topic: str, group: str, **config: Any) -> None:
        self.consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest", **config})
        self.held: set[int] = set()
        self._stop = threading.Event()

        def assigned(_: Any, partitions: list[Any]) -> None:
            self.held |= {tp.partition for tp in partitions}

        def revoked(_: Any, partitions: list[Any]) -> None:
            self.held -= {tp.partition for tp in partitions}

        self.consumer.subscribe([topic], on_assign=assigned, on_revoke=revoked)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.1)

    def wait_assigned(self) -> None:
        deadline = time.monotonic() + READY_S
        while not self.held:
            assert time.monotonic() < deadline, "the holder got no partition"
            time.sleep(0.05)

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.consumer.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        if not h._stop.is_set():
            h.leave()


def test_archive_drain_names_partitions_a_live_member_holds(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, holders: list[Holder]) -> None:
    from kafeed.archive.sink import run_archive

    topic = make_topic(partitions=3)
    produce_docs(kafka.bootstrap, topic, 300)
    holder = Holder(kafka, topic, f"g-{topic}")
    holders.append(holder)
    holder.wait_assigned()
    with pytest.raises(DrainIncomplete) as failed:
        run_archive(settings(topic, tmp_path, drain_stall_s=4.0), kafka, until_caught_up=True)
    message = str(failed.value)
    left = set(range(3)) - {p for p, _ in table_keys(tmp_path)}
    assert left, "the holder's partitions were archived"
    assert message.startswith("kafeed archive: partition"), message
    for p in range(3):
        assert (f"{p} (at nothing of " in message) == (p in left), message
    assert f"held by another member of group 'g-{topic}'" in message
    assert "\n" not in message


def test_prepare_drain_waits_for_a_live_member_then_takes_over(
        kafka: ConnectionSettings, make_topic: TopicFactory, holders: list[Holder]) -> None:
    raw = make_topic(partitions=3)
    texts = paragraphs(300)
    produce(kafka, raw, [sample_record(t) for t in texts])
    holder = Holder(kafka, raw, f"g-{raw}", **{"partition.assignment.strategy": "cooperative-sticky"})
    holders.append(holder)
    holder.wait_assigned()
    prepared: list[Any] = []
    # Dedup per partition: one step, whose group the holder is in.
    settings = PrepareSettings(input=raw, output=f"{raw}.tokens", group=f"g-{raw}", idle_s=0.5,
                               dedup={"scope": "partition"}, kafka={"batch_size": 50})  # type: ignore[arg-type]
    drain = threading.Thread(
        target=lambda: prepared.append(run_prepare(settings, kafka, until_caught_up=True)))
    drain.start()
    # The drain does its own partitions, then waits for the holder's: it must not stop there.
    deadline = time.monotonic() + READY_S
    while len(holder.held) == 3 or not _committed_to_end(kafka, raw, f"g-{raw}", set(range(3)) - holder.held):
        assert time.monotonic() < deadline and drain.is_alive(), "the drain did not commit its partitions"
        time.sleep(0.1)
    time.sleep(4 * settings.idle_s)  # idle periods after which a drain of its own partitions stops
    assert drain.is_alive(), "the drain stopped while another member still held partitions"
    holder.leave()
    drain.join(timeout=READY_S)
    assert prepared and prepared[0].balanced
    ids = document_ids(read_topic(kafka, settings.output))
    assert len(ids) == len(set(ids)) == len(texts)
