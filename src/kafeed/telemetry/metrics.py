"""Every ``kafeed_*`` Prometheus metric, defined once, in kafeed's own registry.

Pipeline stages (ingest, prepare, loader, train) update the metrics here with
one line per event, e.g. ``RECORDS_IN.labels(stage="prepare", topic=t).inc(n)``;
``kafeed monitor`` sets the cluster-side gauges. Nothing is served until a
process calls :func:`serve_metrics` (the ``--metrics-port`` flag, off by
default). Units follow Prometheus conventions: ``_total`` counters, seconds,
bytes. See docs/monitor.md for the wiring of each stage.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("kafeed")


class Folding(Protocol):
    """A hot path that keeps its figures aside and hands them to the metrics in :meth:`fold`."""

    def fold(self) -> None: ...


_folding: weakref.WeakSet[Folding] = weakref.WeakSet()


def fold_before_collect(source: Folding) -> None:
    """Have ``source.fold()`` called before every collection of :data:`REGISTRY` (a scrape,
    ``get_sample_value``), so figures it keeps aside are never seen stale; held weakly."""
    _folding.add(source)


class _FoldingRegistry(CollectorRegistry):
    def collect(self) -> Iterable[Metric]:
        for source in list(_folding):
            source.fold()
        return super().collect()


#: The registry every kafeed metric lives in (not prometheus_client's global one,
#: so a host application's metrics and ours never collide).
REGISTRY = _FoldingRegistry(auto_describe=True)

STAGES = ("ingest", "prepare", "route", "infer", "loader", "train", "monitor")

# -- pipeline: records and bytes ---------------------------------------------

RECORDS_IN = Counter("kafeed_records_in_total", "Records a stage read.",
                     ["stage", "topic"], registry=REGISTRY)
RECORDS_OUT = Counter("kafeed_records_out_total", "Records a stage wrote or handed on.",
                      ["stage", "topic"], registry=REGISTRY)
BYTES_IN = Counter("kafeed_bytes_in_total", "Payload bytes a stage read.",
                   ["stage", "topic"], registry=REGISTRY)
BYTES_OUT = Counter("kafeed_bytes_out_total", "Payload bytes a stage wrote or handed on.",
                    ["stage", "topic"], registry=REGISTRY)
FILTERED = Counter("kafeed_filtered_total", "Records dropped by a quality filter.",
                   ["stage", "filter"], registry=REGISTRY)
DUPLICATES = Counter("kafeed_duplicates_total", "Records dropped as exact duplicates.",
                     ["stage"], registry=REGISTRY)
DEAD_LETTERED = Counter("kafeed_dead_lettered_total", "Records sent to the dead-letter topic.",
                        ["stage", "reason"], registry=REGISTRY)
PRODUCE_ERRORS = Counter("kafeed_produce_errors_total", "Records whose delivery failed.",
                         ["stage"], registry=REGISTRY)
PRODUCE_RETRIES = Counter("kafeed_produce_retries_total", "Produce or transaction retries.",
                          ["stage"], registry=REGISTRY)
ROUTED = Counter("kafeed_routed_total", "Records the router assigned, by the rule that matched them.",
                 ["stage", "rule"], registry=REGISTRY)  # rule "default": unmatched, sent to the default
TRANSACTIONS = Counter("kafeed_transactions_total", "Kafka transactions by result.",
                       ["stage", "result"], registry=REGISTRY)  # result: commit | abort

# Record timestamp -> handed to the trainer: milliseconds (warm loader) up to
# hours (a backlog being replayed), so the buckets span both.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   300.0, 900.0, 3600.0, 4 * 3600.0)
END_TO_END_LATENCY = Histogram(
    "kafeed_end_to_end_latency_seconds", "Record timestamp to handed to the trainer.",
    ["stage"], buckets=LATENCY_BUCKETS, registry=REGISTRY)

INFER_BATCH_SIZE = Histogram(
    "kafeed_infer_batch_records", "Records per inference batch (one forward pass).", ["stage"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), registry=REGISTRY)

# -- loader and trainer -------------------------------------------------------

BATCHES = Counter("kafeed_batches_total", "Batches produced by the loader or consumed by a trainer.",
                  ["stage"], registry=REGISTRY)
TOKENS = Counter("kafeed_tokens_total", "Tokens handed on.", ["stage"], registry=REGISTRY)
DATA_WAIT = Counter("kafeed_data_wait_seconds_total", "Seconds the consumer of batches waited for data.",
                    ["stage"], registry=REGISTRY)
SOURCE_TOKENS = Counter("kafeed_loader_source_tokens_total", "Tokens a mixture handed on, per source.",
                       ["source"], registry=REGISTRY)
LOADER_POSITION = Gauge("kafeed_loader_position", "Next offset the loader will read.",
                        ["topic", "partition"], registry=REGISTRY)
TRAIN_LOSS = Gauge("kafeed_train_loss", "Latest training loss.", ["stage"], registry=REGISTRY)
TRAIN_STEP = Gauge("kafeed_train_step", "Latest optimizer step.", ["stage"], registry=REGISTRY)
MIRROR_BEHIND = Gauge("kafeed_mirror_behind_records",
                      "Records at a site not yet committed in the training cluster (kafeed mirror run).",
                      ["site"], registry=REGISTRY)

# -- librdkafka statistics (statistics.interval.ms -> stats_cb), see stats.py --

CLIENT_TX_BYTES = Counter("kafeed_client_tx_bytes_total", "Bytes librdkafka sent to brokers.",
                          ["stage", "client"], registry=REGISTRY)
CLIENT_RX_BYTES = Counter("kafeed_client_rx_bytes_total", "Bytes librdkafka received from brokers.",
                          ["stage", "client"], registry=REGISTRY)
CLIENT_TX_MESSAGES = Counter("kafeed_client_tx_messages_total", "Messages librdkafka sent.",
                             ["stage", "client"], registry=REGISTRY)
CLIENT_RX_MESSAGES = Counter("kafeed_client_rx_messages_total", "Messages librdkafka received.",
                             ["stage", "client"], registry=REGISTRY)
CLIENT_TX_ERRORS = Counter("kafeed_client_tx_errors_total", "Request transmit errors, all brokers.",
                           ["stage", "client"], registry=REGISTRY)
CLIENT_TX_RETRIES = Counter("kafeed_client_tx_retries_total", "Request retries, all brokers.",
                            ["stage", "client"], registry=REGISTRY)
CLIENT_QUEUE_MESSAGES = Gauge("kafeed_client_queue_messages", "Messages waiting in librdkafka queues.",
                              ["stage", "client"], registry=REGISTRY)
BROKER_RTT = Gauge("kafeed_broker_rtt_seconds", "Broker round-trip time seen by the client.",
                   ["stage", "broker", "quantile"], registry=REGISTRY)
CLIENT_CONSUMER_LAG = Gauge("kafeed_client_consumer_lag", "Consumer lag seen by the client (messages).",
                            ["stage", "topic", "partition"], registry=REGISTRY)

# -- cluster side (kafeed monitor) -------------------------------------------

BROKERS_UP = Gauge("kafeed_brokers_up", "Brokers in the cluster metadata.", registry=REGISTRY)
BROKERS_EXPECTED = Gauge("kafeed_brokers_expected", "Brokers the cluster should have.",
                         registry=REGISTRY)
ACTIVE_CONTROLLER = Gauge("kafeed_active_controller", "Node id of the active controller (-1: none).",
                          registry=REGISTRY)
PARTITIONS = Gauge("kafeed_partitions", "Partitions by health: total, under_replicated, offline, "
                   "under_min_isr.", ["state"], registry=REGISTRY)
HIGH_WATERMARK = Gauge("kafeed_topic_high_watermark", "Log end offset.", ["topic", "partition"],
                       registry=REGISTRY)
TOPIC_IN_RATE = Gauge("kafeed_topic_messages_in_per_second", "Messages appended per second.",
                      ["topic"], registry=REGISTRY)
TOPIC_OUT_RATE = Gauge("kafeed_topic_messages_out_per_second", "Committed-offset advance per second.",
                       ["topic", "group"], registry=REGISTRY)
CONSUMER_LAG = Gauge("kafeed_consumer_lag", "High watermark minus the group's committed offset.",
                     ["group", "topic", "partition"], registry=REGISTRY)
#: Burrow status as a number: see lag.STATUS_CODES (0 OK, 1 WARN, 2 STALL, 3 STOP, 4 REWIND).
PARTITION_STATUS = Gauge("kafeed_consumer_partition_status", "Burrow status code per partition.",
                         ["group", "topic", "partition"], registry=REGISTRY)
GROUP_STATUS = Gauge("kafeed_consumer_group_status", "Burrow group status (0 OK, 1 WARN, 2 ERR).",
                     ["group"], registry=REGISTRY)
DISK_USED = Gauge("kafeed_disk_used_bytes", "Bytes of Kafka data per broker log dir.",
                  ["broker", "log_dir"], registry=REGISTRY)
DISK_FREE = Gauge("kafeed_disk_free_bytes", "Free bytes on the log dir's filesystem.",
                  ["broker", "log_dir"], registry=REGISTRY)
DISK_USED_RATIO = Gauge("kafeed_disk_used_ratio", "Used share of the log dir's filesystem (0..1).",
                        ["broker", "log_dir"], registry=REGISTRY)
ALERTS_FIRING = Gauge("kafeed_alerts_firing", "1 while an alert fires.", ["alert", "subject"],
                      registry=REGISTRY)

# -- the task queue (kafeed tasks worker) --------------------------------------

TASKS_SUBMITTED = Counter("kafeed_tasks_submitted_total", "Tasks written to a queue.", ["kind"],
                          registry=REGISTRY)
TASKS_STARTED = Counter("kafeed_tasks_started_total", "Handler runs started.", ["kind"],
                        registry=REGISTRY)
TASKS_SUCCEEDED = Counter("kafeed_tasks_succeeded_total", "Tasks whose handler returned.", ["kind"],
                          registry=REGISTRY)
TASKS_FAILED = Counter("kafeed_tasks_failed_total", "Handler runs that raised.", ["kind"],
                       registry=REGISTRY)
TASKS_RETRIED = Counter("kafeed_tasks_retried_total", "Failed tasks put back with a backoff.",
                        ["kind"], registry=REGISTRY)
TASKS_PARKED = Counter("kafeed_tasks_parked_total", "Tasks parked after their last attempt.",
                       ["kind"], registry=REGISTRY)
TASKS_SKIPPED = Counter("kafeed_tasks_skipped_total", "Deliveries acknowledged unrun: done, "
                        "cancelled, expired, stale, or deferred (not due, or leased elsewhere).",
                        ["kind", "reason"], registry=REGISTRY)
TASKS_RUNNING = Gauge("kafeed_tasks_running", "Handlers running now.", ["kind"], registry=REGISTRY)
TASKS_HANDLER_SECONDS = Histogram(
    "kafeed_tasks_handler_seconds", "Handler run time.", ["kind"],
    buckets=(0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600), registry=REGISTRY)
#: How long a task waited on the queue: submit (or its retry's not-before time) to handler start.
TASKS_QUEUE_WAIT = Histogram(
    "kafeed_tasks_queue_wait_seconds", "Submit (or retry not-before) to handler start.", ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 300, 900, 3600),
    registry=REGISTRY)
#: Set by `kafeed monitor` from the queue and results topics (cluster-side, every worker or none).
TASK_QUEUE = Gauge("kafeed_tasks_queue", "Tasks per kind by state (queued, in_flight, done, failed, "
                   "parked, cancelled), read from the queue by kafeed monitor.",
                   ["prefix", "kind", "state"], registry=REGISTRY)
TASK_OLDEST_WAIT = Gauge("kafeed_tasks_oldest_waiting_seconds", "Age of the oldest task of a kind that "
                         "no worker has finished or holds, read by kafeed monitor (0: none waiting).",
                         ["prefix", "kind"], registry=REGISTRY)


# -- federated rounds (kafeed federate) ------------------------------------------

FED_VERSION = Gauge("kafeed_federate_global_version", "The newest global model version published.",
                    ["job"], registry=REGISTRY)
FED_ROUNDS = Counter("kafeed_federate_rounds_total", "Rounds closed (a new global version each).",
                     ["job"], registry=REGISTRY)
FED_PARTICIPANTS = Gauge("kafeed_federate_participants", "Sites whose updates the last round used.",
                         ["job"], registry=REGISTRY)
FED_UPDATES = Counter("kafeed_federate_updates_total", "Updates the coordinator read, by outcome "
                      "(accepted, late_folded, late_dropped, duplicate, rejected, empty).",
                      ["job", "outcome"], registry=REGISTRY)
FED_ROUND_SECONDS = Histogram(
    "kafeed_federate_round_seconds", "Global version published to the next one published.", ["job"],
    buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600), registry=REGISTRY)
FED_UPDATE_BYTES = Histogram(
    "kafeed_federate_update_bytes", "Size of one update as sent.", ["job", "site"],
    buckets=tuple(float(4**k) for k in range(5, 17)), registry=REGISTRY)
FED_STALENESS = Histogram(
    "kafeed_federate_staleness_rounds", "Rounds between an update's round and the round that used it.",
    ["job"], buckets=(0, 1, 2, 3, 5, 10), registry=REGISTRY)

SMALL_BATCH = 64  # up to this many timestamps, observe_latencies counts buckets in plain Python


def observe_latencies(stage: str, timestamps_ms: Sequence[int] | np.ndarray, *,
                      now: float | None = None) -> None:
    """Record end-to-end latency for a whole batch: Kafka timestamps (ms) to ``now``.

    One histogram update per batch (bucket counts from numpy), not one call per
    record; the result is the same as observing each latency.
    """
    import numpy as np  # lazily: `import kafeed` stays light for the CLI

    if len(timestamps_ms) == 0:
        return
    at = time.time() if now is None else now
    child = END_TO_END_LATENCY.labels(stage=stage)
    buckets = getattr(child, "_buckets", None)
    bounds = getattr(child, "_upper_bounds", None)
    total = getattr(child, "_sum", None)
    if len(timestamps_ms) <= SMALL_BATCH and buckets is not None and bounds is not None \
            and total is not None:
        # A few records: plain Python is several times cheaper than numpy's per-call overhead.
        stamps = timestamps_ms.tolist() if isinstance(timestamps_ms, np.ndarray) else timestamps_ms
        latencies = [max(0.0, at - t / 1000.0) for t in stamps]
        per_bucket: dict[int, int] = {}
        for value in latencies:
            index = bisect.bisect_left(bounds, value)
            per_bucket[index] = per_bucket.get(index, 0) + 1
        for index, n in per_bucket.items():
            buckets[index].inc(n)
        total.inc(sum(latencies))
        return
    ts = np.asarray(timestamps_ms, dtype=np.float64)
    observe_seconds(child, np.maximum(0.0, at - ts / 1000.0))


def observe_seconds(child: Any, seconds: np.ndarray) -> None:
    """Observe every value of ``seconds`` in the histogram child ``child``, one update per
    bucket (the result is the same as observing each value)."""
    import numpy as np

    buckets = getattr(child, "_buckets", None)
    bounds = getattr(child, "_upper_bounds", None)
    total = getattr(child, "_sum", None)
    if buckets is None or bounds is None or total is None:  # another prometheus_client layout
        for value in seconds.tolist():
            child.observe(value)
        return
    # prometheus_client counts a value in the first bucket whose bound is >= it
    counts = np.bincount(np.searchsorted(np.asarray(bounds), seconds, side="left"), minlength=len(bounds))
    for index in np.flatnonzero(counts).tolist():
        buckets[index].inc(int(counts[index]))
    total.inc(float(seconds.sum()))


@contextmanager
def data_wait(stage: str) -> Iterator[None]:
    """Count the time spent in the block as ``kafeed_data_wait_seconds_total{stage}``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        DATA_WAIT.labels(stage=stage).inc(time.perf_counter() - start)


_servers: list[Any] = []
_serve_lock = threading.Lock()


def serve_metrics(port: int, *, addr: str = "127.0.0.1") -> int:
    """Serve :data:`REGISTRY` at ``http://addr:port/metrics`` from a daemon thread.

    Binds loopback by default (metrics can name topics); pass ``addr="0.0.0.0"``
    for a remote Prometheus. ``port=0`` picks a free port. Returns the port.
    """
    from prometheus_client import start_http_server

    with _serve_lock:
        server, _thread = start_http_server(port, addr=addr, registry=REGISTRY)
        _servers.append(server)
    bound = int(server.server_address[1])
    log.info("serving kafeed metrics on http://%s:%d/metrics", addr, bound)
    return bound


def stop_metrics_servers() -> None:
    """Shut down every server :func:`serve_metrics` started (tests, clean exits)."""
    with _serve_lock:
        while _servers:
            server = _servers.pop()
            server.shutdown()
            server.server_close()
