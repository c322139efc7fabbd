"""One batch from a stream step's consumer: consume calls until it is full, a rebalance, or the timeout."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kafeed.kafka import message_event
from kafeed.stream.batch import RecordBatch, message_column
from kafeed.stream.settings import StreamSettings
from kafeed.stream.stats import StreamCounters

log = logging.getLogger("kafeed")

#: How long a batch's second and later consume calls wait for records (see consume_batch).
_REFILL_WAIT_S = 0.02


def consume_batch(consumer: Any, settings: StreamSettings, counters: StreamCounters,
                  revoked: set[tuple[str, int]], stop_event: threading.Event) -> RecordBatch:
    """One batch: consume calls until ``batch_size`` records, ``batch_max_bytes`` or the timeout.

    A rebalance during a call ends the batch (the rebalance callbacks count it in
    ``counters.rebalances`` and add revoked (topic, partition) pairs to ``revoked``). Records of earlier
    calls from a partition revoked meanwhile are left out: the revoke settled the in-flight
    transaction, and whoever owns the partition now (this process again, perhaps) reads them
    from the committed offset. The messages are kept as they are (:class:`RecordBatch`); a
    call without errors among its messages takes no Python step per message.
    """
    s = settings
    k = s.kafka
    topic = s.inputs[0] if len(s.inputs) == 1 else None  # None: the batch reads each record's
    consume = consumer.consume
    messages: list[Any] = []
    values: list[bytes | None] = []
    nbytes = 0
    deadline = time.monotonic() + k.consume_timeout_s
    wait = k.consume_timeout_s
    while True:
        revoked.clear()
        rebalances = counters.rebalances
        polled = consume(num_messages=min(k.poll_records, k.batch_size - len(messages)), timeout=wait)
        got = bool(polled)
        errors = message_column(polled, "error")
        if errors.count(None) != len(errors):
            polled = [m for m, err in zip(polled, errors, strict=True)
                      if err is None or consumer_error(err, s)]
        polled_values = message_column(polled, "value")
        nbytes += sum(map(len, filter(None, polled_values)))
        if counters.rebalances != rebalances:
            kept = [i for i, m in enumerate(messages) if (m.topic(), m.partition()) not in revoked]
            return RecordBatch([*(messages[i] for i in kept), *polled], topic=topic,
                               values=[*(values[i] for i in kept), *polled_values])
        messages.extend(polled)
        values.extend(polled_values)
        if (not got or len(messages) >= k.batch_size or nbytes >= k.batch_max_bytes
                or time.monotonic() >= deadline or stop_event.is_set()):
            return RecordBatch(messages, topic=topic, values=values)
        # Later calls take what the fetcher has (waiting briefly for it): a batch that
        # stops filling commits now instead of waiting out the timeout.
        wait = min(_REFILL_WAIT_S, max(0.0, deadline - time.monotonic()))


def consumer_error(err: Any, settings: StreamSettings) -> bool:
    """Raise a final consumer error (fatal, or not authorized), log any other but end of
    partition; False: not a record."""
    event = message_event(
        err, action=f"consume {', '.join(map(repr, settings.inputs))} in group {settings.group!r}")
    if event != "end":
        log.warning("consumer: %s", err)
    return False
