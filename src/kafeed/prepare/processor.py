"""`kafeed prepare` as a stage on :mod:`kafeed.stream`: the batch pipeline plus dedup state.

The core runs the transactions; this module supplies the batch function
(:class:`~kafeed.prepare.pipeline.BatchPipeline`) and the dedup seen-sets it keeps
per input partition, rebuilt from the changelog the core writes in each batch's
transaction. Counts and metrics (``stage="prepare"``) are over committed batches,
so in = out + filtered + duplicates + dead-lettered holds for both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from kafeed.config import ConnectionSettings
from kafeed.kafka import RECORD_OVERHEAD
from kafeed.prepare.dedup import DedupState, parse_changelog_record
from kafeed.prepare.inputs import resolve_on_cluster
from kafeed.prepare.pipeline import BatchPipeline, BatchResult
from kafeed.prepare.settings import PrepareSettings
from kafeed.prepare.stats import BatchCounts, PrepareStats
from kafeed.prepare.tokenize import BatchTokenizer, load_tokenizer
from kafeed.route import RuleSet
from kafeed.stream import BatchResult as StreamBatchResult
from kafeed.stream import Record, Stage, StreamProcessor, StreamStats

log = logging.getLogger("kafeed")

ProgressFn = Callable[[PrepareStats], None]


class PrepareStage(Stage[PrepareStats]):
    """Decode → normalize → filter → dedup → tokenize, with the dedup state of the assigned partitions."""

    name = "prepare"

    def __init__(self, settings: PrepareSettings, tokenizer: BatchTokenizer, *,
                 rules: RuleSet | None = None) -> None:
        self.settings = settings
        self.pipeline = BatchPipeline(settings, tokenizer, rules=rules)
        self.dedup = DedupState()
        self.totals = BatchCounts()

    def process(self, records: Sequence[Record]) -> BatchResult:
        return self.pipeline.start(records, self.dedup)

    def finish(self, result: StreamBatchResult) -> None:
        assert isinstance(result, BatchResult)  # what process() returned
        self.pipeline.finish(result)

    def bind(self, max_message_bytes: Mapping[str, int]) -> None:
        # With rules there are several output topics: a document must fit the smallest limit.
        self.pipeline.max_message_bytes = min(max_message_bytes.values()) - RECORD_OVERHEAD

    def committed(self, result: StreamBatchResult) -> None:
        assert isinstance(result, BatchResult)  # what process() returned
        self.dedup.commit()
        self.totals.add_committed(result.counts, self.name)

    def rolled_back(self) -> None:
        self.dedup.rollback()

    def restore(self, partition: int, changelog: Sequence[tuple[bytes, bytes | None]]) -> None:
        seen: set[bytes] = set()
        for key, value in changelog:
            try:
                seen.update(parse_changelog_record(key, value)[1])
            except ValueError as exc:
                log.warning("skipping a dedup changelog record of partition %d: %s", partition, exc)
        self.dedup.load_partition(partition, seen)
        log.debug("dedup state of partition %d rebuilt (%d hashes)", partition, len(seen))

    def drop(self, partition: int) -> None:
        self.dedup.drop_partition(partition)

    def report(self, stats: StreamStats) -> PrepareStats:
        return PrepareStats.of(self.totals, stats)

    def close(self) -> None:
        self.pipeline.close()


class PrepareProcessor(StreamProcessor[PrepareStats]):
    """One prepare worker: the stream core running a :class:`PrepareStage`."""

    def __init__(
        self, settings: PrepareSettings, connection: ConnectionSettings, *,
        tokenizer: BatchTokenizer | None = None, stop_event: threading.Event | None = None,
        on_progress: ProgressFn | None = None, rules: RuleSet | None = None,
    ) -> None:
        self.prepare_settings = settings
        stage = PrepareStage(settings, tokenizer or load_tokenizer(settings.tokenizer), rules=rules)
        super().__init__(stage, settings.stream_settings(rules), connection, stop_event=stop_event,
                         on_progress=on_progress)


class GlobalPrepare:
    """Global dedup: the route and the dedup step, each a :class:`StreamProcessor`, in one process.

    The route runs on the calling thread, the dedup step on a helper thread (tokenizing
    releases the GIL). With ``until_caught_up`` the route finishes when its whole group
    committed the input to its end, and the dedup step, which starts its drain only after
    the route finished, when its whole group committed the repartition topic to its end
    (:meth:`StreamProcessor.caught_up`). An error in either stops both and is raised.
    """

    def __init__(
        self, settings: PrepareSettings, connection: ConnectionSettings, *,
        tokenizer: BatchTokenizer | None = None, stop_event: threading.Event | None = None,
        on_progress: ProgressFn | None = None, rules: RuleSet | None = None,
    ) -> None:
        from kafeed.prepare.rekey import DedupStage, RouteStage

        self.settings = settings
        self.connection = connection
        self.stop_event = stop_event or threading.Event()
        self.on_progress = on_progress
        self.route = StreamProcessor(RouteStage(settings), settings.route_settings(), connection,
                                     stop_event=self.stop_event, on_progress=self._progress)
        self.dedup = StreamProcessor(
            DedupStage(settings, tokenizer or load_tokenizer(settings.tokenizer), rules=rules),
            settings.dedup_settings(rules), connection, stop_event=self.stop_event,
            on_progress=self._progress)
        self._route_done = threading.Event()
        self._error: BaseException | None = None

    def snapshot(self) -> PrepareStats:
        r, d = self.route.snapshot(), self.dedup.snapshot()
        first, last = self.route.counters.first_data, self.dedup.counters.last_commit
        span = last - first if first is not None and last is not None and last > first else None
        return PrepareStats.of_steps((r.counts, r.stream), (d.counts, d.stream), busy_s=span)

    def _progress(self, _: object) -> None:
        if self.on_progress is not None:
            self.on_progress(self.snapshot())

    def _upstream_done(self) -> bool:
        """This process's route finished: its group committed all of the input, so every route
        has written what it will write to the repartition topic."""
        return self._route_done.is_set()

    def _run_dedup(self, until_caught_up: bool) -> None:
        try:
            self.dedup.run(until_caught_up=until_caught_up, upstream=self._upstream_done)
        except BaseException as exc:
            self._error = exc
            self.stop_event.set()

    def run(self, *, until_caught_up: bool = False) -> PrepareStats:
        from kafeed.stream.topics import ensure_topics
        from kafeed.topics import TopicAdmin

        ensure_topics(TopicAdmin(self.connection), self.route.settings)  # the dedup step reads its output
        helper = threading.Thread(target=self._run_dedup, args=(until_caught_up,),
                                  name="kafeed-prepare-dedup", daemon=True)
        helper.start()
        try:
            self.route.run(until_caught_up=until_caught_up)
            self._route_done.set()
        except BaseException:
            self.stop_event.set()
            raise
        finally:
            helper.join()
        if self._error is not None:
            raise self._error
        return self.snapshot()


def run_prepare(
    settings: PrepareSettings, connection: ConnectionSettings, *, until_caught_up: bool = False,
    stop_event: threading.Event | None = None, on_progress: ProgressFn | None = None,
    tokenizer: BatchTokenizer | None = None, rules: RuleSet | None = None,
) -> PrepareStats:
    """Run prepare until ``stop_event`` is set (or, with ``until_caught_up``, until idle at the end).

    Input patterns are resolved against the cluster's topics first (:mod:`kafeed.prepare.inputs`).
    ``rules``: route each document to the topic of the first rule it matches (docs/route.md)
    instead of to ``settings.output``.
    """
    settings = resolve_on_cluster(settings, connection, rules=rules)
    if settings.global_dedup:
        return GlobalPrepare(settings, connection, tokenizer=tokenizer, stop_event=stop_event,
                             on_progress=on_progress, rules=rules).run(until_caught_up=until_caught_up)
    return PrepareProcessor(settings, connection, tokenizer=tokenizer, stop_event=stop_event,
                            on_progress=on_progress, rules=rules).run(until_caught_up=until_caught_up)
