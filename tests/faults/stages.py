"""The seven stages of the fault matrix (tests/faults/harness.py), each described once: how to
fill its input, the command that runs it, its drain, how far it has got, and what came out of it
mapped back to input ids.

Every stage's input carries ids; its output is mapped back to the *item* each id stands for
(copies of one text are one item under several ids), so the harness can count every input id as
written once, dropped as a duplicate, filtered, or dead-lettered.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.schema import decode_document, make_document, make_sample, unpack_tokens
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.ingest_helpers import read_all
from tests.integration.loader_data import producer
from tests.integration.task_handlers import runs
from tests.prepare_support import high_watermarks, paragraphs, produce, read_topic, sample_record

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Place:
    """Where a cell runs: its cluster's connection and node count, a fresh work directory, a
    unique name for its topics and groups, and the trained classifier (for infer only)."""

    kafka: ConnectionSettings
    brokers: int
    work: Path
    name: str
    classifier: Callable[[], Path]


@dataclass(frozen=True)
class Expected:
    """What went in: per input id the item it must come out as (copies share an item), and the
    ids that must be dead-lettered or filtered instead."""

    items: dict[str, str]
    dead: frozenset[str] = frozenset()
    filtered: frozenset[str] = frozenset()

    @property
    def records(self) -> int:
        return len(self.items) + len(self.dead) + len(self.filtered)


@dataclass
class Outcome:
    """What came out: how many times each item was written, each id dead-lettered."""

    written: Counter[str] = field(default_factory=Counter)
    dead: Counter[str] = field(default_factory=Counter)
    #: Facts worth recording that are not counts of the output (e.g. handler re-runs).
    notes: list[str] = field(default_factory=list)


class Stage(ABC):
    """One stage under test, bound to a :class:`Place`."""

    name: ClassVar[str]
    #: Exit code of a run stopped by SIGTERM (kafeed's commands: 143).
    sigterm_code: ClassVar[int] = 143
    #: Whether the command ends by itself (ingest, the trainer): its re-run is its drain.
    bounded: ClassVar[bool] = False

    def __init__(self, place: Place) -> None:
        self.place = place
        self.kafka = place.kafka
        self.input = f"{place.name}-in"
        self.output = f"{place.name}-out"
        self.group = f"g-{place.name}"
        self.home = place.work / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.expected = Expected(items={})
        #: Set by the harness once the fault is injected (input fed during the run goes on then).
        self.faulted = threading.Event()

    def topic(self, name: str, partitions: int = 3) -> str:
        TopicAdmin(self.kafka).create(plan_topic(name, brokers=self.place.brokers, partitions=partitions))
        return name

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
        env["KAFEED_HOME"] = str(self.home)
        env["PYTHONFAULTHANDLER"] = "1"  # a run stuck past its bound is sent SIGABRT: its stacks
        return env

    def cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "kafeed.cli.main", *args]

    @abstractmethod
    def fill(self) -> Expected:
        """Create the topics and write the whole input; what must come out."""

    @abstractmethod
    def command(self) -> list[str]:
        """The command line of one ordinary run."""

    def drain(self) -> list[str] | None:
        """The command that finishes the input and exits 0; None where there is none."""
        return self.command() if self.bounded else [*self.command(), "--until-caught-up", "--json"]

    def feed(self) -> None:  # noqa: B027  most stages have all their input up front
        """Write input that arrives while the stage runs (called on a thread once it started)."""

    @abstractmethod
    def progress(self) -> int:
        """How far the stage has got (records written, rows archived, steps taken), committed or not."""

    @property
    def midway(self) -> int:
        """The progress at which a fault lands mid-run."""
        return max(1, len(set(self.expected.items.values())) // 4)

    @abstractmethod
    def outcome(self) -> Outcome:
        """What the stage has committed so far, mapped back to input items and ids."""

    def watched_topic(self) -> str:
        """The topic whose partition 0 leader the leader-kill fault kills: the one it writes."""
        return self.output


def _dead_keys(kafka: ConnectionSettings, dlq: str) -> Counter[str]:
    if high_watermarks(kafka, dlq) == 0:
        return Counter()
    return Counter(m.key().decode() for m in read_topic(kafka, dlq, timeout=60))


class Ingest(Stage):
    """`kafeed ingest` of a JSONL file: ids in the file, bad lines to the topic's DLQ."""

    name = "ingest"
    bounded = True
    LINES = 100_000

    def fill(self) -> Expected:
        self.topic(self.output)
        self.topic(f"{self.output}.dlq", partitions=1)
        self.source = self.place.work / "input.jsonl"
        bad = {i * (self.LINES // 5) + 7 for i in range(5)}
        with self.source.open("w") as out:
            for i in range(self.LINES):
                text = "" if i in bad else f"small line {i}"
                out.write(json.dumps({"id": f"r{i}", "text": text}) + "\n")
        return Expected(items={f"r{i}": f"r{i}" for i in range(self.LINES) if i not in bad},
                        dead=frozenset(f"r{i}" for i in bad))

    def command(self) -> list[str]:
        return self.cli("ingest", str(self.source), "-t", self.output, "-b", self.kafka.bootstrap,
                        "--job-id", f"job-{self.place.name}", "--commit-records", "5000", "--json",
                        "--no-progress")

    def progress(self) -> int:
        return high_watermarks(self.kafka, self.output)

    def outcome(self) -> Outcome:
        written = Counter((r.key or b"").decode() for r in read_all(self.kafka, self.output, timeout=120))
        dead = Counter(json.loads(r.value or b"{}")["id"] for r in read_all(self.kafka, f"{self.output}.dlq"))
        return Outcome(written=written, dead=dead)


class Prepare(Stage):
    """`kafeed prepare` with global dedup: every text under a fresh id, every fifth text a second
    time under another id (a duplicate), and undecodable records (dead-lettered)."""

    name = "prepare"
    TEXTS = 800

    def fill(self) -> Expected:
        self.topic(self.input, partitions=4)
        self.topic(self.output)
        self.topic(f"{self.input}.dlq", partitions=1)
        texts = paragraphs(self.TEXTS, seed=self.place.name)
        self.item_of_text = {t: f"text-{i}" for i, t in enumerate(texts)}
        items: dict[str, str] = {}
        records = []
        for i, text in enumerate(texts + texts[::5]):
            doc_id = f"p{i}"
            items[doc_id] = self.item_of_text[text]
            records.append(sample_record(text, id=doc_id, key=uuid.uuid4().hex))
        dead = [f"bad-{i}" for i in range(3)]
        records += [(d.encode(), b"\xff\xff\xff", None) for d in dead]
        produce(self.kafka, self.input, records)
        return Expected(items=items, dead=frozenset(dead))

    def command(self) -> list[str]:
        return self.cli("prepare", "--bootstrap", self.kafka.bootstrap, "--input", self.input,
                        "--output", self.output, "--group", self.group, "--batch-size", "20",
                        "--dedup-scope", "global")

    def progress(self) -> int:
        return high_watermarks(self.kafka, self.output)

    def outcome(self) -> Outcome:
        written: Counter[str] = Counter()
        for m in read_topic(self.kafka, self.output, timeout=60):
            doc = decode_document(m.value())
            text = bytes(unpack_tokens(doc.tokens, doc.dtype).tolist()).decode()
            written[self.item_of_text.get(text, f"unknown text of {doc.id}")] += 1
        return Outcome(written=written, dead=_dead_keys(self.kafka, f"{self.input}.dlq"))


class Route(Stage):
    """`kafeed route`: 'good' samples to the output, 'junk' dropped (filtered), the rest matching
    no rule (dead-lettered as unrouted)."""

    name = "route"
    RECORDS = 2000

    def fill(self) -> Expected:
        self.topic(self.input)
        self.topic(self.output)
        self.topic(f"{self.input}.dlq", partitions=1)
        self.rules = self.place.work / "routes.toml"
        self.rules.write_text(
            f'[[rule]]\nname = "junk"\nmetadata = {{ kind = ["junk"] }}\nto = "drop"\n\n'
            f'[[rule]]\nname = "good"\nmetadata = {{ kind = ["good"] }}\nto = "{self.output}"\n')

        def kind(i: int) -> str:
            return "junk" if i % 50 == 3 else "other" if i % 400 == 5 else "good"

        produce(self.kafka, self.input, [
            (f"k{i}".encode(),
             make_sample(f"text {i}", id=f"k{i}", metadata={"kind": kind(i)}).SerializeToString(), None)
            for i in range(self.RECORDS)])
        ids = {i: f"k{i}" for i in range(self.RECORDS)}
        return Expected(items={k: k for i, k in ids.items() if kind(i) == "good"},
                        dead=frozenset(k for i, k in ids.items() if kind(i) == "other"),
                        filtered=frozenset(k for i, k in ids.items() if kind(i) == "junk"))

    def command(self) -> list[str]:
        return self.cli("route", "-b", self.kafka.bootstrap, "--input", self.input,
                        "--rules", str(self.rules),
                        "--group", self.group, "--batch-size", "20", "--poll-records", "20")

    def progress(self) -> int:
        return high_watermarks(self.kafka, self.output)

    def outcome(self) -> Outcome:
        written = Counter(m.key().decode() for m in read_topic(self.kafka, self.output, timeout=60))
        return Outcome(written=written, dead=_dead_keys(self.kafka, f"{self.input}.dlq"))


class Infer(Stage):
    """`kafeed infer` with a tiny trained classifier: one prediction per sample, undecodable
    records dead-lettered."""

    name = "infer"
    RECORDS = 600

    def fill(self) -> Expected:
        self.checkpoint = self.place.classifier()
        self.topic(self.input, partitions=2)
        self.topic(self.output, partitions=2)
        self.topic(f"{self.input}.dlq", partitions=1)
        texts = paragraphs(self.RECORDS, seed="infer")
        records = [(f"s-{i}".encode(),
                    make_sample(t, id=f"s-{i}", targets=[float(i % 2)]).SerializeToString(), None)
                   for i, t in enumerate(texts)]
        dead = [f"bad-{i}" for i in range(3)]
        records += [(d.encode(), b"\xff\xfe not a sample", None) for d in dead]
        produce(self.kafka, self.input, records)
        return Expected(items={f"s-{i}": f"s-{i}" for i in range(len(texts))}, dead=frozenset(dead))

    def command(self) -> list[str]:
        return self.cli("infer", "-b", self.kafka.bootstrap, "--checkpoint", str(self.checkpoint),
                        "--input", self.input, "--output", self.output, "--group", self.group,
                        "--batch-size", "8", "--max-wait-ms", "200")

    def progress(self) -> int:
        return high_watermarks(self.kafka, self.output)

    def outcome(self) -> Outcome:
        out = read_topic(self.kafka, self.output, timeout=60)
        written = Counter(json.loads(m.value())["id"] for m in out)
        return Outcome(written=written, dead=_dead_keys(self.kafka, f"{self.input}.dlq"))


class Archive(Stage):
    """`kafeed archive` into a local Iceberg table. A sink commits whatever one consume call
    returned, so a backlog would be archived in one commit: most of the input arrives while it
    runs (50 documents every 0.1 s from the sink's first commit or the fault on), and it commits
    every 0.2 s. Table rows are mapped back to input keys by (partition, offset)."""

    name = "archive"
    DOCS = 3000
    UPFRONT = 300

    def _produce(self, first: int, count: int) -> None:
        p = producer(self.kafka.bootstrap)
        for i in range(first, first + count):
            doc = make_document(np.full(20, i + 1), id=f"doc-{i}", vocab_size=65536, tokenizer="test")
            p.produce(self.input, key=f"doc-{i}".encode(), value=doc.SerializeToString())
        assert p.flush(120) == 0  # a broker restart may hold the records back for a while

    def fill(self) -> Expected:
        self.topic(self.input)
        self.warehouse = self.place.work / "warehouse"
        self.key_at: dict[tuple[int, int], str] = {}
        self._produce(0, self.UPFRONT)
        return Expected(items={f"doc-{i}": f"doc-{i}" for i in range(self.DOCS)})

    def feed(self) -> None:
        deadline = time.monotonic() + 180
        # From the sink's first commit on (or the fault, if it lands before).
        while self.progress() == 0 and not self.faulted.wait(0.1) and time.monotonic() < deadline:
            pass
        for first in range(self.UPFRONT, self.DOCS, 50):
            self._produce(first, 50)
            time.sleep(0.1)  # the pace of the input is the point here, not a wait for something

    def command(self) -> list[str]:
        return self.cli("archive", "--bootstrap", self.kafka.bootstrap, "--topic", self.input,
                        "--table", "arch.t", "--warehouse", str(self.warehouse), "--group", self.group,
                        "--flush-interval", "0.2")

    def _rows(self) -> list[tuple[int, int]]:
        from tests.integration.archive_support import table_keys

        try:
            return table_keys(self.warehouse)
        except ConfigError:  # no table yet
            return []

    def progress(self) -> int:
        return len(self._rows())

    def outcome(self) -> Outcome:
        if len(self.key_at) < self.DOCS:
            self.key_at = {(m.partition(), m.offset()): m.key().decode()
                           for m in read_topic(self.kafka, self.input, timeout=60)}
        return Outcome(written=Counter(self.key_at.get(r, f"unknown row {r}") for r in self._rows()))

    def watched_topic(self) -> str:
        return self.input  # its output is a table


class Tasks(Stage):
    """`kafeed tasks worker` on a queue of short tasks: a key submitted three times runs once (two
    duplicates), an always-failing task is parked (dead-lettered)."""

    name = "tasks"
    TASKS = 40

    def fill(self) -> Expected:
        from kafeed.tasks import QueueSettings, make_task, submit_tasks

        self.prefix = self.place.name
        self.settings = QueueSettings(prefix=self.prefix, backoff_s=0.2)
        self.log = self.place.work / "runs.log"

        def task(key: str, **params: Any) -> Any:
            return make_task(kind="mixed", key=key, params={"key": key, "log": str(self.log), **params})

        tasks = [task(f"t{i}", mode="slow", seconds=0.25) for i in range(self.TASKS)]
        tasks += [task("dup"), task("dup"), task("dup"), task("fail", mode="fail")]
        submit_tasks(self.kafka, tasks, settings=self.settings, create_queue=True)
        items = {f"t{i}": f"t{i}" for i in range(self.TASKS)} | {f"dup#{n}": "dup" for n in range(3)}
        return Expected(items=items, dead=frozenset({"fail"}))

    def command(self) -> list[str]:
        return self.cli("tasks", "worker", "--kind", "mixed",
                        "--handler", "tests.integration.task_handlers:mixed",
                        "--concurrency", "2", "--timeout", "1", "--lease", "2", "--backoff", "0.2",
                        "--prefix", self.prefix, "-b", self.kafka.bootstrap)

    def drain(self) -> list[str] | None:
        return None  # a worker runs until stopped

    def progress(self) -> int:
        return sum(1 for event, *_ in runs(self.log) if event == "done")

    def outcome(self) -> Outcome:
        from kafeed.kafka import KafkaClients
        from kafeed.tasks.model import decode_result

        final: dict[str, str] = {}
        for record in KafkaClients(self.kafka).read_to_end(self.settings.results_topic):
            result = decode_result(record.value())
            if result is not None:
                final[result.key] = result.status
        parked = Counter(r.key().decode()
                         for r in KafkaClients(self.kafka).read_to_end(self.settings.parked_topic))
        done = Counter(key for event, key, _, _ in runs(self.log) if event == "done")
        reruns = {k: n - 1 for k, n in done.items() if n > 1}
        notes = [f"handler ran again after a kill: {reruns}"] if reruns else []
        # A key whose handler is done while its last result is a lease or a retry never counts
        # as written: say so, or a cell waiting for it looks like a worker that gets nothing.
        unsettled = {k: s for k, s in final.items() if s not in ("succeeded", "parked") and done[k]}
        if unsettled:
            notes.append(f"handler done, last result not final: {unsettled}")
        succeeded = Counter(k for k, s in final.items() if s == "succeeded")
        return Outcome(written=succeeded, dead=parked, notes=notes)

    def watched_topic(self) -> str:
        return self.settings.results_topic


class Loader(Stage):
    """A trainer (tests/integration/loader_trainer.py) on a bounded StreamLoader with two worker
    processes, checkpointing loader state and tokens seen per document after every step.
    Document v is 15 tokens of value v (one window of seq_len 15 with its end-of-document), so
    the tokens seen per value count the times each document reached the trainer."""

    name = "loader"
    sigterm_code = -15  # the script installs no handler: SIGTERM ends it
    bounded = True
    PER_PARTITION = 200

    def fill(self) -> Expected:
        self.topic(self.input, partitions=2)
        self.checkpoint = self.place.work / "trainer.json"
        p = producer(self.kafka.bootstrap)
        items = {}
        for partition in range(2):
            for i in range(self.PER_PARTITION):
                value = 1 + partition * self.PER_PARTITION + i
                doc = make_document(np.full(15, value), id=f"d{value}", vocab_size=65536)
                p.produce(self.input, value=doc.SerializeToString(), partition=partition)
                items[f"d{value}"] = f"d{value}"
        assert p.flush(30) == 0
        self.size = 2 * self.PER_PARTITION + 1
        return Expected(items=items)

    def command(self) -> list[str]:
        return [sys.executable, str(ROOT / "tests" / "integration" / "loader_trainer.py"),
                "--bootstrap", self.kafka.bootstrap, "--topic", self.input,
                "--checkpoint", str(self.checkpoint),
                "--size", str(self.size), "--workers", "2", "--step-sleep", "0.03"]

    def _checkpoint(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self.checkpoint.read_text())
            return state
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def progress(self) -> int:
        return int(self._checkpoint().get("steps", 0)) * 4  # windows: batches of 4

    def outcome(self) -> Outcome:
        seen = np.asarray(self._checkpoint().get("seen", [0] * self.size), dtype=np.int64)
        written: Counter[str] = Counter()
        notes = []
        for value in range(1, self.size):
            times, partial = divmod(int(seen[value]), 15)
            if times:
                written[f"d{value}"] = times
            if partial:
                notes.append(f"d{value}: {partial} stray tokens")
        return Outcome(written=written, notes=notes)

    def watched_topic(self) -> str:
        return self.input


STAGES: dict[str, type[Stage]] = {s.name: s for s in (Ingest, Prepare, Route, Infer, Archive, Tasks, Loader)}
