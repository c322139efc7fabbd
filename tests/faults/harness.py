"""One harness for every (stage, fault) cell of the fault matrix (tests/faults/test_matrix.py).

A cell fills the stage's input, starts one ordinary run of it, waits for the fault's readiness
signal (output grown past a quarter of the input, or a process of the stage past its imports),
injects the fault, recovers the way an operator would, and then checks three things:

- counts: every input id came out exactly once (read_committed), or is counted as dropped
  duplicate, filtered or dead-lettered; nothing came out twice or from nowhere;
- lifetime: no process of any run of the stage (the whole tree, collected before each kill)
  is left once the cell is over;
- recovery: the time from the fault to a complete output, recorded and held to a bound.

Recovery, per fault: SIGKILL mid-batch restarts the ordinary run and waits for complete output;
SIGKILL then drain runs the drain (``--until-caught-up``) at once, which must exit 0 with the
output already complete; a kill during start-up, and SIGTERM (after which the run must exit with
its stop code), are followed by the drain too; a killed partition leader or a restarted broker
must be survived by the running stage itself.

Each cell's numbers are printed and, with ``KAFEED_MATRIX_RESULTS=<file>``, appended to that file
as one JSON line (docs/faults.md is written from a full run's lines).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, ClassVar

from kafeed.broker import LocalCluster
from tests.cluster_support import partition_leader, wait_brokers, wait_full_isr
from tests.faults.stages import Outcome, Stage
from tests.process_tree import alive, descendants, describe, wait_gone

#: Fault to complete output. A drain right after a SIGKILL waits out the dead member's session
#: (10 s) and a leader's failover takes up to a broker session (9 s); the rest is interpreter
#: starts (torch for infer) and reading on a loaded 2-core machine. Measured values are in
#: docs/faults.md; this bound only catches a stage that does not recover.
RECOVERY_BOUND_S = 180.0
#: How much of a run's stderr a failure shows (a stuck run's stacks take 5-10 kB).
SAID_CHARS = 16_000
#: Readiness (the stage got midway, or got past its imports) within this long.
READY_S = 180.0
#: A run sent SIGTERM exits within this long (it finishes or aborts one transaction).
STOP_S = 60.0
#: Once the cell is over, every process of the stage is gone within this long.
GONE_S = 15.0
POLL_S = 0.2


class Run:
    """One process of the stage, its output in files, and every process ever seen below it."""

    def __init__(self, command: list[str], stage: Stage, label: str) -> None:
        self.label = label
        self.out_path = stage.place.work / f"{label}.out"
        self.err_path = stage.place.work / f"{label}.err"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(command, env=stage.env(), cwd=stage.place.work, stdout=out,
                                         stderr=err)
        self.tree: set[int] = {self.proc.pid}

    def look(self) -> None:
        """Add the processes now below any process of the tree (call before a kill: a killed
        process's children are re-parented and no longer lead back to it)."""
        for pid in list(self.tree):
            self.tree |= descendants(pid)

    def said(self) -> str:
        """The end of the run's stderr: long enough for every thread's stack after a SIGABRT."""
        return self.err_path.read_text(errors="replace")[-SAID_CHARS:]

    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        self.look()
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # faulthandler prints where it was stuck
            self.proc.wait(timeout=30)
            said = self.said()
            raise AssertionError(f"{self.label} still running {timeout:.0f} s later:\n{said}") from None


@dataclass
class Cell:
    """A (stage, fault) cell while it runs: its runs, what it measured, its notes."""

    stage: Stage
    fault: Fault
    cluster: LocalCluster | None
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: A killed broker being restarted beside the run.
    restart: threading.Thread | None = None
    #: What :meth:`complete` last found missing, for the message of a run that never completes.
    lacking: str = ""

    def __post_init__(self) -> None:
        self.feeding = threading.Thread(target=self.stage.feed, name="feed-input", daemon=True)

    def start(self, command: list[str], label: str) -> Run:
        run = Run(command, self.stage, label)
        self.runs.append(run)
        return run

    def until(self, condition: Callable[[], bool], what: str, timeout: float, run: Run | None = None) -> None:
        """Poll ``condition``; fail after ``timeout``, or when ``run`` exits first."""
        deadline = time.monotonic() + timeout
        while not condition():
            if run is not None:
                run.look()
                assert run.proc.poll() is None, (
                    f"{run.label} exited {run.proc.returncode} before {what}:\n{run.said()}")
            if time.monotonic() > deadline:
                said = ""
                if run is not None:  # faulthandler prints where the stuck run's threads were
                    run.proc.send_signal(signal.SIGABRT)
                    run.proc.wait(timeout=30)
                    said = f"; {run.label} said:\n{run.said()}"
                raise AssertionError(f"no {what} within {timeout:.0f} s{said}")
            time.sleep(POLL_S)

    def complete(self) -> bool:
        """Whether everything expected is out (checked exactly afterwards by :func:`count`)."""
        expected = self.stage.expected
        items = set(expected.items.values())
        if self.stage.progress() < len(items):
            self.lacking = f"progress {self.stage.progress()} of {len(items)}"
            return False
        got = self.stage.outcome()
        missing = sorted(items - set(got.written)) + sorted(expected.dead - set(got.dead))
        self.lacking = f"not out: {missing[:20]}; notes: {got.notes}"
        return not missing

    def finish(self, run: Run) -> None:
        """Let a running ordinary run finish its input: a bounded one exits 0; an unbounded one
        is stopped with SIGTERM once the output is complete and exits with its stop code."""
        if self.stage.bounded:
            code = run.wait(RECOVERY_BOUND_S)
            assert code == 0, f"{run.label} exited {code}:\n{run.said()}"
            return
        try:
            self.until(self.complete, "complete output", RECOVERY_BOUND_S, run)
        except AssertionError as exc:
            raise AssertionError(f"{self.lacking}\n{exc}") from None
        # A SIGTERM before the command has installed its stop handler (while Python imports it)
        # would end it with the default action, which is not what this checks.
        self.until(lambda: past_imports(run), "the run past its imports", READY_S, run)
        run.signal(signal.SIGTERM)
        code = run.wait(STOP_S)
        assert code == self.stage.sigterm_code, f"{run.label} exited {code} on SIGTERM:\n{run.said()}"

    def drain(self) -> None:
        """The stage's drain: it must exit 0 with the output complete when it does. A stage
        without one (a tasks worker) is started again and stopped once its output is complete."""
        # A drain covers the input as of its start: the input still arriving comes first.
        self.feeding.join(timeout=RECOVERY_BOUND_S)
        command = self.stage.drain()
        if command is None:
            self.finish(self.start(self.stage.command(), "restart"))
            return
        run = self.start(command, "drain")
        code = run.wait(RECOVERY_BOUND_S)
        assert code == 0, f"the drain exited {code}:\n{run.said()}"
        if not self.stage.bounded:
            summary = json.loads(run.stdout())
            assert summary.get("balanced", True), f"the drain's counts do not balance: {summary}"

    def leftovers(self) -> set[int]:
        for run in self.runs:
            if run.proc.poll() is None:
                run.look()
        return wait_gone({pid for run in self.runs for pid in run.tree}, GONE_S)

    def clean_up(self) -> None:
        for run in self.runs:
            for pid in [run.proc.pid, *(run.tree - {run.proc.pid})]:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
            run.proc.wait(timeout=30)


def past_imports(run: Run) -> bool:
    """Whether the run's process has loaded librdkafka: its imports are done, its clients start."""
    try:
        return "librdkafka" in Path(f"/proc/{run.proc.pid}/maps").read_text()
    except OSError:
        return False


class Fault:
    """A fault: when to inject it, how, and how the stage recovers from it."""

    name: ClassVar[str]
    #: Needs a cluster of its own: "three" (3 nodes) or "restartable" (1 node); None: the session's.
    cluster: ClassVar[str | None] = None

    def ready(self, cell: Cell, run: Run) -> bool:
        """The readiness signal: by default, the stage's output grown past a quarter of its input."""
        return cell.stage.progress() >= cell.stage.midway

    def inject(self, cell: Cell, run: Run) -> None:
        raise NotImplementedError

    def recover(self, cell: Cell, run: Run) -> None:
        cell.drain()


class KillMidBatch(Fault):
    """SIGKILL once the output is past a quarter (with batches of 20 or a few thousand records,
    a transaction is open most of the time); then the ordinary run is started again."""

    name = "sigkill"

    def inject(self, cell: Cell, run: Run) -> None:
        run.signal(signal.SIGKILL)
        run.proc.wait(timeout=30)

    def recover(self, cell: Cell, run: Run) -> None:
        cell.finish(cell.start(cell.stage.command(), "restart"))


class KillThenDrain(KillMidBatch):
    """SIGKILL as above, and at once the drain, while the dead member still holds its partitions."""

    name = "sigkill-drain"

    def recover(self, cell: Cell, run: Run) -> None:
        cell.drain()


class KillDuringStartup(KillMidBatch):
    """SIGKILL while the run starts: once a child process exists (the trainer's loader workers),
    else once the process has loaded librdkafka (its imports are done, its clients not yet
    working). The drain follows."""

    name = "sigkill-startup"

    def ready(self, cell: Cell, run: Run) -> bool:
        run.look()
        if cell.stage.name == "loader":
            return len(run.tree) > 1
        return past_imports(run)

    def inject(self, cell: Cell, run: Run) -> None:
        if cell.stage.progress() > 0:
            cell.notes.append("the kill landed after the first output")
        super().inject(cell, run)

    def recover(self, cell: Cell, run: Run) -> None:
        cell.drain()


class Sigterm(Fault):
    """SIGTERM midway: the run exits with its stop code within a minute; the drain follows."""

    name = "sigterm"

    def inject(self, cell: Cell, run: Run) -> None:
        run.signal(signal.SIGTERM)
        code = run.wait(STOP_S)
        assert code == cell.stage.sigterm_code, f"exited {code} on SIGTERM:\n{run.said()}"


class LeaderKill(Fault):
    """On a 3-node cluster, SIGKILL the broker leading partition 0 of the topic the stage writes
    (or reads, for archive and the trainer), restart it beside the run; the run goes on."""

    name = "leader-kill"
    cluster = "three"

    def inject(self, cell: Cell, run: Run) -> None:
        assert cell.cluster is not None
        node = partition_leader(cell.cluster.bootstrap, cell.stage.watched_topic())
        cell.cluster.kill_node(node)
        cell.notes.append(f"killed node {node}")
        cell.restart = threading.Thread(target=cell.cluster.start, name="restart-killed-node")
        cell.restart.start()

    def recover(self, cell: Cell, run: Run) -> None:
        try:
            cell.finish(run)
        finally:
            if cell.restart is not None:
                cell.restart.join(timeout=300)
        assert cell.cluster is not None
        wait_brokers(cell.cluster.bootstrap, 3)
        wait_full_isr(cell.cluster.bootstrap, cell.stage.watched_topic(), 3)


class BrokerRestart(Fault):
    """Stop the only broker of the cell's own cluster and start it again; the run goes on (a run
    that gives up instead is recorded, and the drain finishes its input)."""

    name = "broker-restart"
    cluster = "restartable"

    def inject(self, cell: Cell, run: Run) -> None:
        assert cell.cluster is not None
        down = time.monotonic()
        cell.cluster.stop(timeout=20)
        cell.cluster.start(timeout=120)
        cell.notes.append(f"broker down {time.monotonic() - down:.0f} s")

    def recover(self, cell: Cell, run: Run) -> None:
        if run.proc.poll() is not None and run.proc.returncode != 0:
            cell.notes.append(f"the run exited {run.proc.returncode} while the broker was down")
            cell.drain()
            return
        cell.finish(run)


FAULTS: dict[str, Fault] = {f.name: f for f in (KillMidBatch(), KillThenDrain(), KillDuringStartup(),
                                                 Sigterm(), LeaderKill(), BrokerRestart())}


@dataclass(frozen=True)
class Counts:
    """A cell's accounting, per input id."""

    records_in: int
    written: int
    duplicates_dropped: int
    filtered: int
    dead_lettered: int
    missing: list[str]
    doubled: dict[str, int]
    unexpected: list[str]
    dead_wrong: dict[str, int]

    @property
    def exact(self) -> bool:
        return not (self.missing or self.doubled or self.unexpected or self.dead_wrong)


def count(stage: Stage, got: Outcome) -> Counts:
    """Every input id: written once (as its item), dropped as a copy of an item written, filtered,
    or dead-lettered once."""
    expected = stage.expected
    items = set(expected.items.values())
    leaked = [i for i in sorted(expected.filtered) if got.written.get(i)]
    dead_wrong = {i: got.dead[i] for i in expected.dead | set(got.dead)
                  if got.dead[i] != (i in expected.dead)}
    return Counts(records_in=expected.records, written=sum(got.written.values()),
                  duplicates_dropped=len(expected.items) - len(items),
                  filtered=len(expected.filtered), dead_lettered=sum(got.dead.values()),
                  missing=sorted(items - set(got.written)),
                  doubled={i: n for i, n in got.written.items() if n > 1},
                  unexpected=sorted(set(got.written) - items) + leaked, dead_wrong=dead_wrong)


def run_cell(stage: Stage, fault: Fault, cluster: LocalCluster | None) -> dict[str, object]:
    """Run one cell; assert its counts, leftovers and recovery bound; return what it measured."""
    stage.expected = stage.fill()
    cell = Cell(stage, fault, cluster)
    try:
        run = cell.start(stage.command(), "run")
        cell.feeding.start()
        cell.until(lambda: fault.ready(cell, run), "readiness signal", READY_S, run)
        if fault.name != "sigkill-startup":
            done = len(set(stage.expected.items.values()))
            assert stage.progress() < done, "the run was done before the fault"
        faulted = time.monotonic()
        fault.inject(cell, run)
        stage.faulted.set()
        fault.recover(cell, run)
        cell.feeding.join(timeout=RECOVERY_BOUND_S)
        recovery_s = time.monotonic() - faulted
        got = stage.outcome()
        left = cell.leftovers()
    finally:
        cell.clean_up()
    counts = count(stage, got)
    result: dict[str, object] = {"stage": stage.name, "fault": fault.name, **asdict(counts),
                                 "recovery_s": round(recovery_s, 1), "leftover": describe(left),
                                 "notes": cell.notes + got.notes}
    _record(result)
    assert counts.exact, f"{stage.name} under {fault.name}: {result}"
    assert not left, f"alive {GONE_S:.0f} s after the cell: {describe(left)}"
    assert recovery_s < RECOVERY_BOUND_S
    return result


def _record(result: dict[str, object]) -> None:
    line = json.dumps(result)
    print(f"fault matrix: {line}")
    path = os.environ.get("KAFEED_MATRIX_RESULTS")
    if path:
        out: IO[str]
        with open(path, "a") as out:
            out.write(line + "\n")
