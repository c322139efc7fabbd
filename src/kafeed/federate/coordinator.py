"""The coordinator: one round after another on the training cluster, each closed exactly once.

Round ``r`` starts when global version ``r - 1`` is published (its record's timestamp starts the
deadline). The coordinator reads every site's update topic ``read_committed`` from the offsets
its group committed with the last round, reassembles each update (:mod:`kafeed.federate.blobs`)
and sorts it:

- ``accepted``: round ``r``, a site not yet counted in ``r``;
- ``duplicate``: a (site, round) already counted, in this round or in an earlier one (a site
  that crashed after sending and sent its ledger's update again);
- ``late_folded`` / ``late_dropped``: an update for a closed round, folded into round ``r``
  (``late_policy = "next"``, its staleness counted) or dropped (``"drop"``);
- ``rejected``: an update whose tensors do not have the model's shape (or from another round
  than any open or closed one): one warning sentence, the round goes on without it;
- ``empty``: an update of a site that had no data left (0 samples): it weighs nothing.

The round closes once it has ``quorum`` accepted updates and its deadline has passed (or every
site sent one). The coordinator aggregates (FedAvg weighted by samples, FedAdam as a server
optimizer on the mean delta: :mod:`kafeed.federate.aggregate`) and, in ONE transaction, writes
version ``r`` to the global topic, the round's record to the round log (what it used, dropped
and counted; the FedAdam state) and the positions past the updates it read. A coordinator
killed anywhere in a round leaves that transaction open or absent: its successor (same
transactional id) aborts it, reads the last version and the round log, and reads the updates
again from the committed positions. No update is lost (it is still in its topic) and none is
counted twice (the positions and the round log commit with the version that used it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kafeed.errors import ConfigError, KafeedError, SchemaError
from kafeed.federate.aggregate import FedAdam, fedavg, flatten, unflatten
from kafeed.federate.aggregate import FedAdamSettings as AdamHyper
from kafeed.federate.blobs import Blob, BlobAssembler, blobs_of, encode_arrays, produce_blob
from kafeed.federate.config import FederationSettings
from kafeed.federate.global_model import GlobalFollower, GlobalVersion, publish_control, publish_global
from kafeed.federate.setup import coordinator_transactional_id, job_topics
from kafeed.federate.weights import Arrays, arrays_of, build_model, check_shapes
from kafeed.kafka import KafkaClients, message_event
from kafeed.telemetry import metrics as m

log = logging.getLogger("kafeed")
Progress = Callable[[str, dict[str, Any]], None]
OUTCOMES = ("accepted", "late_folded", "late_dropped", "duplicate", "rejected", "empty")


@dataclass(frozen=True)
class Update:
    """One update as the coordinator read it."""

    site: str
    round: int
    samples: int
    base_version: int
    arrays: Arrays
    size: int


#: With secure aggregation, how long the coordinator waits for the roster's masked updates, and
#: then for their seeds, before it redoes the attempt without the missing sites (at least).
SECURE_STEP_S = 10.0


@dataclass
class SecureState:
    """One round's secure aggregation as the coordinator follows it (kafeed.federate.secagg):
    keys, then the roster (published), masked updates, ``received`` (published), seeds."""

    attempt: int = 0
    phase: str = "keys"  # keys -> masked -> seeds
    keys: dict[str, bytes] = field(default_factory=dict)
    roster: dict[str, bytes] | None = None
    masked: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    seeds: dict[str, bytes] = field(default_factory=dict)
    phase_deadline: float = float("-inf")
    result: tuple[int, np.ndarray] | None = None
    failed: str | None = None

    def redo(self, attempt: int, deadline: float) -> None:
        self.attempt, self.phase, self.phase_deadline = attempt, "keys", deadline
        self.keys, self.roster, self.masked, self.sizes, self.seeds = {}, None, {}, {}, {}


@dataclass
class OpenRound:
    """What the coordinator holds of the round being collected (rebuilt from Kafka on resume)."""

    round: int
    deadline: float
    started: float
    accepted: dict[str, Update] = field(default_factory=dict)
    late: dict[tuple[str, int], Update] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    positions: dict[str, int] = field(default_factory=dict)
    waiting_said: bool = False
    secure: SecureState | None = None


@dataclass
class CoordinatorSummary:
    job: str
    rounds: list[dict[str, Any]] = field(default_factory=list)
    resumed_at: int | None = None
    final_version: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "resumed_at": self.resumed_at, "final_version": self.final_version,
                "rounds": self.rounds}


def read_round_log(clients: KafkaClients, settings: FederationSettings) -> list[Blob]:
    """Every committed record of the round log, oldest first."""
    return blobs_of(clients.read_to_end(settings.rounds_topic), what="the round log")


class Coordinator:
    """Runs the job's rounds until version ``settings.rounds`` is published (or ``stop``)."""

    def __init__(self, settings: FederationSettings, *, progress: Progress | None = None,
                 stop: threading.Event | None = None, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.progress = progress or (lambda event, info: None)
        self.stop = stop or threading.Event()
        self.clock = clock
        self.summary = CoordinatorSummary(settings.job)
        self.clients = KafkaClients(settings.training_connection())
        self._adam = FedAdam(settings=AdamHyper(**settings.fedadam.model_dump())) \
            if settings.strategy == "fedadam" else None
        self._counted: set[tuple[str, int]] = set()
        self._controls: list[dict[str, Any]] = []
        self._site_of_topic = {settings.update_topic(s.name): s.name for s in settings.sites}

    # -- start and resume ---------------------------------------------------------------------
    def _check_topics(self) -> None:
        listed = self.clients.admin().list_topics(timeout=15).topics
        missing = [t for t in job_topics(self.settings) if t not in listed]
        if missing:
            raise ConfigError(f"The training cluster has no topic {missing[0]!r} of job "
                              f"{self.settings.job!r}.",
                              hint="Create the job's topics first: kafeed federate setup --config FILE.")

    def _start(self, producer: Any) -> GlobalVersion:
        """The current global version: the last one published, or version 0, published now."""
        settings = self.settings
        log_records = read_round_log(self.clients, settings)
        current = self._read_global()
        for blob in log_records:
            _, meta = blob.arrays()
            self._counted.update((c["site"], int(c["round"])) for c in meta.get("contributors", ()))
        if log_records:
            arrays, meta = log_records[-1].arrays()
            if self._adam is not None and "m" in arrays:
                self._adam.load_state_dict({"version": 1, "rounds": int(meta["adam_rounds"]),
                                            "settings": settings.fedadam.model_dump(),
                                            "m": arrays["m"].astype(np.float64),
                                            "v": arrays["v"].astype(np.float64)})
            if current is None or current.version != int(meta["version"]):
                raise SchemaError(f"The round log of job {settings.job!r} ends at version {meta['version']}, "
                                  f"the global topic at {None if current is None else current.version}.",
                                  hint="They commit together: the topics were changed by hand.")
            self.summary.resumed_at = current.version
            self.progress("resumed", {"version": current.version, "rounds_logged": len(log_records)})
            return current
        model = build_model(settings.model, settings.seed)
        arrays = arrays_of(model)
        meta = {"round": 0, "version": 0, "final": False, "contributors": [], "strategy": settings.strategy}
        size = self._commit(producer, 0, arrays, meta, {})
        self.progress("published", {"version": 0, "bytes": size})
        # Round 1's deadline runs from here; a restart reads it from the record's timestamp instead.
        return GlobalVersion(0, arrays, meta, int(self.clock() * 1000), -1, size)

    def _read_global(self) -> GlobalVersion | None:
        """The newest version; the control messages written after it go to ``_controls``."""
        follower = GlobalFollower(self.clients, self.settings.global_topic,
                                  group_prefix=f"{self.settings.job}.coordinator-")
        try:
            current = follower.read_to_end()
            self._controls = follower.controls
            return current
        finally:
            follower.close()

    def _commit(self, producer: Any, version: int, arrays: Arrays, meta: dict[str, Any],
                positions: dict[str, int], consumer: Any = None) -> int:
        """Version ``version``, its round record and the update positions, in one transaction."""
        settings = self.settings
        server: dict[str, np.ndarray] = {}
        if self._adam is not None:
            state = self._adam.state_dict()
            if state["m"] is not None:
                server = {"m": state["m"], "v": state["v"]}
            meta = {**meta, "adam_rounds": state["rounds"]}
        producer.begin()
        size = publish_global(producer, settings.global_topic, version, arrays, meta)
        produce_blob(producer, settings.rounds_topic, f"round{meta['round']}", encode_arrays(server, meta))
        if positions:
            producer.send_offsets({(topic, 0): offset for topic, offset in positions.items()},
                                  consumer.consumer_group_metadata())
        producer.commit()
        return size

    def _consumer(self) -> Any:
        from kafeed.kafka.types import OFFSET_BEGINNING, TopicPartition

        topics = [self.settings.update_topic(s.name) for s in self.settings.sites]
        consumer = self.clients.read_committed_consumer(
            {"group.id": self.settings.coordinator_group, "auto.offset.reset": "earliest",
             "enable.partition.eof": False, "fetch.max.bytes": 52_428_800}, stage="federate-coordinator")
        committed = consumer.committed([TopicPartition(t, 0) for t in topics], timeout=30)
        consumer.assign([TopicPartition(tp.topic, 0, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                         for tp in committed])
        return consumer

    # -- the rounds -----------------------------------------------------------------------------
    def run(self) -> CoordinatorSummary:
        settings = self.settings
        self._check_topics()
        producer = self.clients.transactional_producer(
            transactional_id=coordinator_transactional_id(settings), stage="federate-coordinator")
        producer.init()  # fences a killed predecessor and aborts what it left open
        current = self._start(producer)
        m.FED_VERSION.labels(job=settings.job).set(current.version)
        consumer = self._consumer()
        assemblers = self._assemblers()
        try:
            while not current.final and not self.stop.is_set():
                open_round = self._open(current)
                while not self.stop.is_set():
                    for msg in consumer.consume(num_messages=500, timeout=0.2):
                        err = msg.error()
                        if err is not None:
                            message_event(err, action="read the sites' updates")
                            continue
                        blob = assemblers[msg.topic()].add(msg)
                        if blob is not None:
                            self._sort(open_round, msg.topic(), blob, current)
                    if self._may_close(open_round, producer):
                        break
                if self.stop.is_set():
                    break
                try:
                    current = self._close(producer, consumer, open_round, current)
                except KafeedError as exc:
                    # The transaction is undone; read the round's updates again from the
                    # committed positions, as a successor would.
                    log.warning("closing round %d failed (%s); collecting it again", open_round.round, exc)
                    producer.recover(exc)
                    consumer.close()
                    consumer = self._consumer()
                    assemblers = self._assemblers()
        finally:
            consumer.close()
        self.summary.final_version = current.version
        return self.summary

    def _assemblers(self) -> dict[str, BlobAssembler]:
        return {t: BlobAssembler(what=f"the update topic {t!r}") for t in self._site_of_topic}

    def _open(self, current: GlobalVersion) -> OpenRound:
        started = current.timestamp_ms / 1000.0
        round_ = OpenRound(round=current.version + 1, deadline=started + self.settings.deadline_s,
                           started=started)
        if self.settings.secure:
            # A resumed round goes on from the control messages it had published.
            state = round_.secure = SecureState()
            for c in self._controls:
                if int(c.get("round", -1)) != round_.round:
                    continue
                if c["kind"] == "attempt":
                    state.redo(int(c["attempt"]), self.clock() + SECURE_STEP_S)
                elif c["kind"] == "roster":
                    state.attempt, state.phase = int(c["attempt"]), "masked"
                    state.roster = {s: bytes.fromhex(k) for s, k in c["roster"].items()}
                elif c["kind"] == "received":
                    state.phase = "seeds"
            if state.phase != "keys" or state.attempt:
                state.phase_deadline = self.clock() + SECURE_STEP_S
        self._controls = []
        self.progress("round", {"round": round_.round, "from_version": current.version})
        return round_

    def _sort(self, open_round: OpenRound, topic: str, blob: Blob, current: GlobalVersion) -> None:
        site = self._site_of_topic[topic]
        open_round.positions[topic] = blob.last_offset + 1
        try:
            arrays, meta = blob.arrays()
            if "kind" in meta or self.settings.secure:
                self._sort_secure(open_round, site, meta, arrays, len(blob.data), current)
                return
            update = Update(site=site, round=int(meta["round"]), samples=int(meta["samples"]),
                            base_version=int(meta["base_version"]), arrays=arrays, size=len(blob.data))
            if meta.get("site") != site:
                raise SchemaError(f"An update on {topic!r} says it is from {meta.get('site')!r}.")
            check_shapes(arrays, current.arrays,
                         what=f"The update of site {site!r} for round {update.round}")
        except (SchemaError, KeyError, ValueError, TypeError) as exc:
            self._count(open_round, "rejected", site, str(exc))
            return
        key = (site, update.round)
        if key in self._counted or key in open_round.late or (
                site in open_round.accepted and update.round == open_round.round):
            self._count(open_round, "duplicate", site, f"round {update.round} is counted already")
        elif update.samples <= 0:
            self._count(open_round, "empty", site, "it trained on no data")
        elif update.round == open_round.round:
            open_round.accepted[site] = update
            self._count(open_round, "accepted", site, None, samples=update.samples, bytes=update.size)
        elif update.round < open_round.round and self.settings.late_policy == "next":
            open_round.late[key] = update
            self._count(open_round, "late_folded", site, None, of_round=update.round)
        elif update.round < open_round.round:
            self._count(open_round, "late_dropped", site, None, of_round=update.round)
        else:
            self._count(open_round, "rejected", site, f"round {update.round} is not open yet")

    def _sort_secure(self, open_round: OpenRound, site: str, meta: dict[str, Any],
                     arrays: Arrays, size: int, current: GlobalVersion) -> None:
        from kafeed.federate.secagg import MaskedUpdate, round_tag

        state = open_round.secure
        kind, round_ = meta.get("kind"), int(meta["round"])
        if state is None or kind not in ("key", "masked", "seed") or meta.get("site") != site:
            why = "the job is secure: an unmasked update is refused" if state is not None else \
                "the job is not secure: a secure-aggregation message is refused"
            self._count(open_round, "rejected", site, why)
            return
        if round_ != open_round.round:
            if kind == "masked":
                # A masked update opens only with its own round's seeds: it cannot be folded.
                self._count(open_round, "late_dropped" if round_ < open_round.round else "rejected",
                            site, None if round_ < open_round.round else f"round {round_} is not open",
                            of_round=round_)
            return
        if int(meta["attempt"]) != state.attempt:
            return  # a message of an abandoned attempt
        if kind == "key" and state.phase == "keys":
            state.keys[site] = bytes.fromhex(meta["public"])  # a restarted site's newer key wins
            self.progress("keys", {"round": round_, "attempt": state.attempt, "site": site})
        elif kind == "masked" and state.phase != "keys" and state.roster and site in state.roster:
            # (In "seeds" only when a resumed coordinator reads the attempt's updates again.)
            length = flatten(current.arrays).shape[0]
            values = arrays.get("values")
            if values is None or values.dtype != np.uint64 or values.shape != (length + 1,):
                self._count(open_round, "rejected", site, f"its masked update does not have the model's "
                            f"{length} values")
                return
            if site in state.masked:
                self._count(open_round, "duplicate", site, "its masked update is in already")
                return
            tag = round_tag(self.settings.job, round_, state.attempt)
            state.masked[site] = MaskedUpdate(site, tag, values)
            state.sizes[site] = size
            self._count(open_round, "accepted", site, None, attempt=state.attempt, bytes=size)
        elif kind == "seed" and state.phase == "seeds" and state.roster and site in state.roster:
            state.seeds[site] = bytes.fromhex(meta["seed"])

    def _publish_control(self, producer: Any, kind: str, open_round: OpenRound, **meta: Any) -> None:
        state = open_round.secure
        if state is None:  # pragma: no cover - secure rounds only
            return
        producer.begin()
        publish_control(producer, self.settings.global_topic, kind, open_round.round, state.attempt, meta)
        producer.commit()
        self.progress(kind, {"round": open_round.round, "attempt": state.attempt,
                             **{k: v for k, v in meta.items() if k != "roster"},
                             **({"sites": sorted(meta["roster"])} if "roster" in meta else {})})

    def _advance(self, open_round: OpenRound, producer: Any) -> bool:
        """One step of a secure round; True once it can close (summed, or failed for good)."""
        from kafeed.federate.secagg import FixedPoint, round_tag, sum_masked, unmask_mean

        state = open_round.secure
        settings = self.settings
        if state is None:  # pragma: no cover - secure rounds only
            return False
        now = self.clock()
        if state.phase == "keys":
            have = len(state.keys)
            due = now >= max(open_round.deadline, state.phase_deadline)
            if have == len(settings.sites) or (due and have >= settings.quorum):
                state.roster = dict(sorted(state.keys.items()))
                self._publish_control(producer, "roster", open_round,
                                      roster={s: k.hex() for s, k in state.roster.items()})
                state.phase, state.phase_deadline = "masked", now + max(settings.deadline_s, SECURE_STEP_S)
            elif due and not open_round.waiting_said:
                open_round.waiting_said = True
                self.progress("waiting", {"round": open_round.round, "have": have, "quorum": settings.quorum})
            return False
        roster = state.roster or {}
        if state.phase == "masked":
            if set(state.masked) == set(roster):
                self._publish_control(producer, "received", open_round, sites=sorted(roster))
                state.phase, state.phase_deadline = "seeds", now + max(settings.deadline_s, SECURE_STEP_S)
            elif now >= state.phase_deadline:
                missing = sorted(set(roster) - set(state.masked))
                self.progress("redo", {"round": open_round.round, "attempt": state.attempt + 1,
                                       "without": missing})
                state.redo(state.attempt + 1, now + max(settings.deadline_s, SECURE_STEP_S))
                self._publish_control(producer, "attempt", open_round, after_missing=missing)
            return False
        if set(state.seeds) == set(roster):
            tag = round_tag(settings.job, open_round.round, state.attempt)
            length = next(iter(state.masked.values())).length
            total = sum_masked(state.masked.values(), roster=roster, round_tag=tag, length=length)
            state.result = unmask_mean(total, seeds=state.seeds, round_tag=tag, fixed=FixedPoint())
            return True
        if now >= state.phase_deadline:
            # Some sites revealed their seeds; a second attempt would let the two sums tell one
            # site's update (kafeed.federate.secagg). The round closes without an aggregate.
            state.failed = ("no seed from " + ", ".join(sorted(set(roster) - set(state.seeds)))
                            + "; the round closes without an aggregate")
            return True
        return False

    def _count(self, open_round: OpenRound, outcome: str, site: str, why: str | None, **info: Any) -> None:
        open_round.counts[outcome] += 1
        m.FED_UPDATES.labels(job=self.settings.job, outcome=outcome).inc()
        if outcome == "rejected":
            log.warning("round %d: the update of site %s is rejected: %s", open_round.round, site, why)
        self.progress("update", {"round": open_round.round, "site": site, "outcome": outcome, **info,
                                 **({"why": why} if why else {})})

    def _may_close(self, open_round: OpenRound, producer: Any) -> bool:
        settings = self.settings
        if open_round.secure is not None:
            return self._advance(open_round, producer)
        have = len(open_round.accepted)
        if have == len(settings.sites):
            return True
        if self.clock() < open_round.deadline:
            return False
        if have >= settings.quorum:
            return True
        if not open_round.waiting_said:
            open_round.waiting_said = True
            self.progress("waiting", {"round": open_round.round, "have": have, "quorum": settings.quorum})
        return False

    def _close(self, producer: Any, consumer: Any, open_round: OpenRound,
               current: GlobalVersion) -> GlobalVersion:
        settings = self.settings
        used = [*open_round.accepted.values(), *open_round.late.values()]
        base = flatten(current.arrays)
        secure = open_round.secure
        contributors: list[dict[str, Any]]
        if secure is None:
            mean = fedavg([flatten(u.arrays) for u in used], [u.samples for u in used])
            total_samples = sum(u.samples for u in used)
            contributors = [{"site": u.site, "round": u.round, "samples": u.samples, "bytes": u.size,
                             "staleness": open_round.round - u.round} for u in used]
        elif secure.result is not None:
            # The coordinator learns the sum of the sample counts and the weighted mean, no more.
            total_samples, mean = secure.result
            contributors = [{"site": s, "round": open_round.round, "samples": None,
                             "bytes": secure.sizes[s], "staleness": 0} for s in sorted(secure.roster or {})]
        else:
            mean, total_samples, contributors = np.zeros_like(base), 0, []
            log.warning("round %d: %s", open_round.round, secure.failed)
        if contributors:
            new = self._adam.step(base, mean) if self._adam is not None else (base + mean).astype(np.float32)
        else:
            new = base
        arrays: Arrays = unflatten(new, current.arrays)
        now = self.clock()
        meta = {"round": open_round.round, "version": open_round.round,
                "final": open_round.round >= settings.rounds, "strategy": settings.strategy,
                "contributors": contributors, "counts": open_round.counts, "samples": total_samples,
                "secure": secure is not None,
                **({"secure_attempts": secure.attempt + 1, "failed": secure.failed} if secure else {}),
                "round_seconds": round(now - open_round.started, 3)}
        size = self._commit(producer, open_round.round, arrays, meta, open_round.positions, consumer)
        self._counted.update((c["site"], int(c["round"])) for c in contributors)
        m.FED_ROUNDS.labels(job=settings.job).inc()
        m.FED_VERSION.labels(job=settings.job).set(open_round.round)
        m.FED_PARTICIPANTS.labels(job=settings.job).set(len(contributors))
        m.FED_ROUND_SECONDS.labels(job=settings.job).observe(max(0.0, now - open_round.started))
        for c in contributors:
            m.FED_STALENESS.labels(job=settings.job).observe(c["staleness"])
        record = {**meta, "bytes": size}
        self.summary.rounds.append(record)
        self.progress("published", {"version": open_round.round,
                                    "sites": [c["site"] for c in contributors],
                                    "samples": meta["samples"], "seconds": meta["round_seconds"],
                                    "counts": open_round.counts, "bytes": size})
        return GlobalVersion(open_round.round, arrays, meta, int(now * 1000), -1, size)
