"""`kafeed tasks cancel`: mark submitted tasks cancelled, and refuse keys never submitted.

A cancel is a ``cancelled`` result for the key in the results topic; a worker that later
gets a copy of the key acknowledges it unrun. Writing one for a key that was never
submitted would say "cancelled" about nothing and, worse, make a later submit of that key
a no-op, so every key is checked against the kind's queue and results first and nothing
is written unless all of them are known.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.kafka import KafkaClients
from kafeed.tasks.model import TaskResult, decode_result
from kafeed.tasks.settings import QueueSettings
from kafeed.tasks.writer import TaskWriter
from kafeed.topics import TopicAdmin

# Already over: nothing left to cancel (a parked task is cancelled, so `retry` skips it).
_OVER = frozenset({"succeeded", "cancelled", "expired"})


@dataclass(frozen=True)
class CancelResult:
    cancelled: list[str]
    already_finished: list[str]


def _submitted(clients: KafkaClients, settings: QueueSettings, kind: str) -> dict[str, TaskResult | None]:
    """Every key of ``kind`` ever queued or given a result: key -> its latest result."""
    known: dict[str, TaskResult | None] = {}
    for msg in clients.read_to_end(settings.queue_topic(kind)):
        if msg.key() is not None:
            known.setdefault(msg.key().decode("utf-8", "replace"), None)
    for msg in clients.read_to_end(settings.results_topic):
        result = decode_result(msg.value())
        if result is not None and result.kind == kind:
            known[result.key] = result  # read in order: the last one is the latest
    return known


def cancel(connection: ConnectionSettings, settings: QueueSettings, kind: str,
           keys: list[str]) -> CancelResult:
    """Cancel ``keys`` of ``kind``: copies still queued are acknowledged unrun (a running one
    finishes). :class:`ConfigError`, and nothing written, when a key was never submitted."""
    clients = KafkaClients(connection)
    if not TopicAdmin(connection, clients=clients).exists(settings.queue_topic(kind)):
        raise ConfigError(f"There is no task queue {settings.queue_topic(kind)!r}: no task of kind "
                          f"{kind!r} was ever submitted.",
                          hint="Check --kind and --prefix; `kafeed tasks status` lists the queues.")
    known = _submitted(clients, settings, kind)
    unknown = [key for key in dict.fromkeys(keys) if key not in known]
    if unknown:
        shown = ", ".join(repr(k) for k in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise ConfigError(f"No task of kind {kind!r} was submitted with key {shown}, so nothing was "
                          "cancelled.", hint="Check the keys with `kafeed tasks status`; only a "
                          "submitted task can be cancelled.")
    todo: list[str] = []
    over: list[str] = []
    for key in dict.fromkeys(keys):
        latest = known[key]
        (over if latest is not None and latest.status in _OVER else todo).append(key)
    writer = TaskWriter(connection, settings, clients=clients)
    for key in todo:
        writer.result_async(TaskResult(key=key, kind=kind, status="cancelled", worker="cancel"))
    writer.flush()
    return CancelResult(cancelled=todo, already_finished=over)
