"""Glue between a trainer and kafeed's loader: lineage, offset mirror, lag, every rank's state.

Each checkpoint holds every rank's loader state (:func:`kafeed.loader.state.rank_states.gather_states`)
and its lineage (:func:`kafeed.train.lineage.lineage_of`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.loader.sources.assignment import partition_key
from kafeed.loader.state.checkpoint import reader_entries
from kafeed.train.lineage import lineage_of
from kafeed.train.options import TrainOptions
from kafeed.train.runner import Runner, RunResult

log = logging.getLogger("kafeed")

def resumed_manifest(checkpoint: str | None) -> dict[str, Any] | None:
    """The manifest of the checkpoint a run resumed from (None for a fresh run)."""
    if checkpoint is None:
        return None
    from pathlib import Path

    from kafeed.train.checkpoint import read_manifest, resolve_manifest

    return read_manifest(resolve_manifest(Path(checkpoint)))


class LoaderWiring:
    """Per-run helpers the runner calls around checkpoints and progress lines."""

    def __init__(self, loader: Any, connection: ConnectionSettings, options: TrainOptions, *,
                 rank: int, world: int) -> None:
        self.loader = loader
        self.connection = connection
        self.options = options
        self.rank = rank
        self.world = world
        self.starts: dict[str, int] = {}
        self._lag_at = 0.0
        self._lag: int | None = None
        self._admin: Any = None

    def begin(self, *, resumed_manifest: dict[str, Any] | None) -> None:
        """Record where this run starts reading, or carry it over from the resumed checkpoint."""
        if resumed_manifest is not None and "lineage" in resumed_manifest:
            self.starts = dict(resumed_manifest["lineage"]["starts"])
            return
        self.starts = self._low_watermarks()

    def _low_watermarks(self) -> dict[str, int]:
        try:
            return self._offsets("earliest")
        except Exception as exc:
            log.warning("could not read the start offsets of %s for lineage: %s", self.options.source, exc)
            return {}

    def _offsets(self, which: str) -> dict[str, int]:
        """Each partition's low ("earliest") or high ("latest") watermark of the topic."""
        from kafeed.kafka import KafkaClients, list_offsets

        admin = KafkaClients(self.connection).admin()
        wanted: list[tuple[str, int]] = []
        for topic in self.options.topics:
            meta = admin.list_topics(topic=topic, timeout=10).topics[topic]
            wanted += [(topic, p) for p in meta.partitions]
        found = list_offsets(admin, wanted, latest=which == "latest", read_committed=False, timeout=10,
                             action=f"read the {which} offsets of {self.options.source}")
        return {partition_key(topic, partition): offset for (topic, partition), offset in found.items()}

    def records_on_topic(self) -> int | None:
        """Records the topic holds now (high minus low watermarks); None when unknown."""
        try:
            low, high = self._offsets("earliest"), self._offsets("latest")
        except Exception as exc:
            log.debug("could not read the watermarks of %s: %s", self.options.source, exc)
            return None
        return sum(max(0, high[key] - low.get(key, 0)) for key in high)

    def reader_stats(self) -> dict[str, int] | None:
        """The live reader's counts (records, bad, tokens) when it runs in this process."""
        stats = getattr(getattr(self.loader, "dataset", None), "stats", None)
        found = stats() if callable(stats) else None
        return dict(found) if found else None

    def manifest(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"lineage": lineage_of(state, self.starts)}

    def mirror_offsets(self, _state: dict[str, Any]) -> None:
        """After a checkpoint: commit this rank's positions to the group, for lag monitoring."""
        try:
            self.loader.commit_offsets(self.options.group)
        except KafeedError as exc:
            log.warning("could not mirror loader offsets to group %s: %s", self.options.group, exc)

    def lag(self) -> int | None:
        """Records between this rank's positions and the high watermarks (every 5 s at most)."""
        now = time.monotonic()
        if now - self._lag_at < 5.0:
            return self._lag
        self._lag_at = now
        try:
            from kafeed.kafka import KafkaClients
            from kafeed.kafka.types import OffsetSpec, TopicPartition

            positions: dict[str, int] = {}
            for reader in reader_entries(self.loader.state_dict()):
                for key, entry in reader["reader"]["partitions"].items():
                    positions[key] = int(entry["next"])
            if not positions:
                return self._lag
            if self._admin is None:
                self._admin = KafkaClients(self.connection).admin()
            req = {}
            for key in positions:
                topic, _, part = key.rpartition(":")
                req[TopicPartition(topic, int(part))] = OffsetSpec.latest()
            res = self._admin.list_offsets(req, request_timeout=5)
            self._lag = sum(max(0, f.result(timeout=5).offset - positions[f"{tp.topic}:{tp.partition}"])
                            for tp, f in res.items())
        except Exception as exc:
            log.debug("lag unavailable: %s", exc)
        return self._lag

    def stats(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for reader in reader_entries(self.loader.state_dict()):
            for key, value in reader["reader"]["stats"].items():
                totals[key] = totals.get(key, 0) + int(value)
        return totals


def run_on_loader(
    *, model: Any, optimizer: Any, loader: Any, step_fn: Any,
    connection: ConnectionSettings, options: TrainOptions, rank: int, world: int,
    progress: Any, config: dict[str, Any],
) -> tuple[RunResult, LoaderWiring]:
    """Build the runner around kafeed's loader, resume if asked, run; (result, wiring)."""
    from kafeed.train.checkpoint import CheckpointManager

    wiring = LoaderWiring(loader, connection, options, rank=rank, world=world)
    submit_eval = None
    if options.eval_every and rank == 0:
        from kafeed.train.eval_tasks import EvalSubmitter

        submit_eval = EvalSubmitter(connection, options, progress=progress)
    runner = Runner(
        model=model, optimizer=optimizer, loader=loader, step_fn=step_fn,
        checkpoints=CheckpointManager(options.checkpoint_dir, keep=options.keep),
        checkpoint_every=options.checkpoint_every, total_steps=options.steps,
        log_every=options.log_every, run_dir=options.run_dir, rank=rank, world_size=world,
        after_checkpoint=wiring.mirror_offsets, manifest_fn=wiring.manifest, lag_fn=wiring.lag,
        progress=progress, config={**options.model_dump(mode="json"), **config},
        source=options.source, on_checkpoint=submit_eval, eval_every=options.eval_every,
    )
    resumed = runner.resume() if options.resume else None
    wiring.begin(resumed_manifest=resumed_manifest(resumed))
    result = runner.run()
    result.resumed_from = resumed
    if result.tokens == 0 and not result.stopped_by_signal and result.start_step < options.steps:
        raise nothing_trained(options, records_on_topic=wiring.records_on_topic(),
                              stats=wiring.reader_stats(), resumed_at=result.start_step if resumed else None)
    return result, wiring


_RECORDS = {"gpt": ("TokenizedDocument", "`kafeed prepare`"),
            "classifier": ("TrainingSample", "`kafeed ingest`")}


def nothing_trained(options: TrainOptions, *, records_on_topic: int | None, stats: dict[str, int] | None,
                    resumed_at: int | None) -> KafeedError:
    """Why a run that had steps to do trained on nothing, as the error to end it with.

    ``stats`` are the reader's counts when it ran in this process (``--num-workers 0``).
    """
    from kafeed.errors import SchemaError

    topic = options.topic
    kind, writer = _RECORDS[options.model]
    if records_on_topic == 0:
        return KafeedError(f"Topic {topic!r} is empty: there are no records to train on.",
                           hint=f"Fill it with {writer} first, or pass --stream to wait for records.")
    records, bad = (stats or {}).get("records", 0), (stats or {}).get("bad", 0)
    if stats is not None and records == 0 and bad > 0:
        other = "classifier" if options.model == "gpt" else "gpt"
        return SchemaError(
            f"No records were trained on: none of the {bad:,} records read from topic {topic!r} "
            f"could be decoded as a {kind}.",
            hint=f"--model {options.model} trains on the records {writer} writes (check --tokenizer "
                 f"too); {_RECORDS[other][0]} records are for --model {other}.")
    if stats is None:
        return KafeedError(
            f"No records were trained on: the loader found no usable {kind} record on topic {topic!r}.",
            hint="The warnings above name the records it skipped; check --model, --tokenizer and --topic.")
    if records == 0 and resumed_at is not None:
        return KafeedError(
            f"No records were trained on: topic {topic!r} has no records after the checkpoint "
            f"of step {resumed_at}.",
            hint=f"Produce more with {writer}, or pass --stream to wait for new records.")
    if records == 0:
        return KafeedError(f"No records were trained on: the loader read none of topic {topic!r}.",
                           hint="Check the topic's retention and --topic.")
    if options.model == "gpt":
        return KafeedError(
            f"No records were trained on: the {records:,} records read from topic {topic!r} hold "
            f"fewer tokens than one window of --seq-len + 1 = {options.seq_len + 1}.",
            hint="Produce more records, or lower --seq-len.")
    return KafeedError(
        f"No records were trained on: none of the {records:,} records read from topic {topic!r} "
        f"has a usable label outside the held-out tenth.",
        hint=f"target_values[0] must be a class index below --num-labels ({options.num_labels}).")
