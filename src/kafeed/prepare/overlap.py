"""A new group over an input whose documents the output already holds: doubling by a new name.

Prepare's exactly-once and dedup hold within one consumer group: its offsets say what was
read, its dedup state what was kept. A run under a new ``--group`` starts from the input's
beginning with an empty dedup state, so into an output that another group already filled
from the same input it writes every document again, silently. Before anything is read,
:func:`check_new_group` looks: when the group has committed nothing on the inputs and the
last records of an output name one of the inputs as their lineage (``input_topic``), the
run is refused in one sentence unless it was asked for (``--reprocess``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kafeed.config import ConnectionSettings
from kafeed.connect import check_reachable
from kafeed.errors import ConfigError, KafeedError, SchemaError, TopicError
from kafeed.kafka import KafkaClients
from kafeed.prepare.settings import PrepareSettings
from kafeed.route import RuleSet
from kafeed.schema import decode_document

log = logging.getLogger("kafeed")

#: How many of each output partition's last records are looked at.
TAIL_RECORDS = 50


def group_has_read(connection: ConnectionSettings, group: str, topics: Sequence[str]) -> bool:
    """Whether ``group`` committed an offset on any partition of ``topics``."""
    from kafeed.kafka.types import TopicPartition

    clients = KafkaClients(connection)
    with clients.reader(what="prepare group check") as reader:
        parts = [TopicPartition(t, p) for t in topics for p in reader.partitions(t)]
    consumer = clients.consumer({"group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.committed(parts, timeout=15)  # kafeed's errors: kafeed.kafka translates
    finally:
        consumer.close()
    return any(tp.offset >= 0 for tp in committed)


def inputs_in_output(connection: ConnectionSettings, output: str, inputs: Sequence[str]) -> set[str]:
    """Which of ``inputs`` the last :data:`TAIL_RECORDS` documents of each partition of
    ``output`` name as the topic they were prepared from (none when it does not exist)."""
    wanted = set(inputs)
    found: set[str] = set()
    with KafkaClients(connection).reader(what="prepare output check") as reader:
        try:
            marks = reader.watermarks(output)
        except TopicError:
            return found
        tail = {p: (max(low, high - TAIL_RECORDS), high) for p, (low, high) in marks.items() if high > low}
        for msg in reader.read(output, tail):
            try:
                topic = decode_document(msg.value()).input_topic
            except SchemaError:
                continue  # not a document: written by something else
            if topic in wanted:
                found.add(topic)
    return found


def check_new_group(settings: PrepareSettings, connection: ConnectionSettings, *,
                    rules: RuleSet | None = None) -> None:
    """Refuse a group that has read nothing of its inputs when an output already holds
    documents prepared from them (see the module's docstring)."""
    inputs = list(settings.input)
    check_reachable(connection)  # a dead cluster is said at once, in one sentence, not after the waits
    try:
        if group_has_read(connection, settings.group, inputs):
            return
        held = {out: sorted(inputs_in_output(connection, out, inputs)) for out in settings.outputs(rules)}
    except KafeedError as exc:  # a missing input, a role that may not read its output: the run says
        log.warning("Could not check whether the output already holds the input's documents: %s",
                    exc.message)
        return
    for output, there in held.items():
        if there:
            raise ConfigError(
                f"Topic {output!r} already holds documents prepared from {there[0]!r}, and group "
                f"{settings.group!r} has read none of it: it would write every one of them again.",
                hint="Resume with the --group that prepared them (its offsets and dedup state "
                "skip what is there), write to a new --output, or pass --reprocess to write them "
                "again on purpose.")
