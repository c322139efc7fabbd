"""The typed consumers: librdkafka's group and share consumers whose calls raise kafeed's errors.

:class:`Consumer` and :class:`ShareConsumer` wrap the client :class:`~kafeed.kafka.KafkaClients`
builds (or :class:`~kafeed.kafka.FakeKafka`'s in-memory one) method for method. A call that
librdkafka fails raises a :class:`~kafeed.errors.KafeedError` (translated by
:mod:`kafeed.kafka.translate`, librdkafka's code kept on it); anything else (a wrong argument,
a closed consumer) is raised as it is. A consumed message that carries an error is read with
:func:`kafeed.kafka.message_event`, which raises the errors that end a run.

The wrappers hold no state of their own and add one Python call per librdkafka call, which is
per batch on the hot paths (``consume(num_messages=...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kafeed.kafka.translate import raise_translated

if TYPE_CHECKING:
    from confluent_kafka import Message, TopicPartition

Rebalance = Callable[["Consumer", list["TopicPartition"]], None]


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(sorted({f"{tp.topic}:{tp.partition}" for tp in partitions})) or "no partitions"


class Consumer:
    """A group consumer (librdkafka's ``Consumer``, or the fake's) whose calls raise kafeed errors.

    ``client`` is the librdkafka consumer; ``what`` names this one in error messages
    (``"the consumer of group 'g'"``). Rebalance callbacks given to :meth:`subscribe` receive
    this object.
    """

    __slots__ = ("_c", "what")

    def __init__(self, client: Any, *, what: str = "a consumer") -> None:
        self._c = client
        self.what = what

    # -- assignment --------------------------------------------------------------------------

    def subscribe(self, topics: Sequence[str], *, on_assign: Rebalance | None = None,
                  on_revoke: Rebalance | None = None, on_lost: Rebalance | None = None) -> None:
        def passing_self(cb: Rebalance) -> Callable[[Any, list[TopicPartition]], None]:
            return lambda _client, parts: cb(self, parts)

        callbacks = {name: passing_self(cb) for name, cb in
                     (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost))
                     if cb is not None}
        try:
            self._c.subscribe(list(topics), **callbacks)
        except Exception as exc:
            raise_translated(exc, action=f"subscribe to {', '.join(map(repr, topics))}")

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        try:
            self._c.assign(partitions)
        except Exception as exc:
            raise_translated(exc, action=f"assign {_names(partitions)}")

    def incremental_assign(self, partitions: Sequence[TopicPartition]) -> None:
        try:
            self._c.incremental_assign(partitions)
        except Exception as exc:
            raise_translated(exc, action=f"assign {_names(partitions)}")

    def incremental_unassign(self, partitions: Sequence[TopicPartition]) -> None:
        try:
            self._c.incremental_unassign(partitions)
        except Exception as exc:
            raise_translated(exc, action=f"unassign {_names(partitions)}")

    def unassign(self) -> None:
        try:
            self._c.unassign()
        except Exception as exc:
            raise_translated(exc, action="unassign the partitions")

    def assignment(self) -> list[TopicPartition]:
        try:
            return list(self._c.assignment())
        except Exception as exc:
            raise_translated(exc, action="read the assignment")

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        try:
            self._c.pause(partitions)
        except Exception as exc:
            raise_translated(exc, action=f"pause {_names(partitions)}")

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        try:
            self._c.resume(partitions)
        except Exception as exc:
            raise_translated(exc, action=f"resume {_names(partitions)}")

    def seek(self, partition: TopicPartition) -> None:
        try:
            self._c.seek(partition)
        except Exception as exc:
            raise_translated(exc, action=f"seek {partition.topic}:{partition.partition} "
                                        f"to {partition.offset}")

    # -- records -----------------------------------------------------------------------------

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to ``num_messages`` messages; some may carry an error (:func:`message_event`)."""
        try:
            msgs: list[Message] = self._c.consume(num_messages=num_messages, timeout=timeout)
        except Exception as exc:
            raise_translated(exc, action=f"consume as {self.what}")
        return msgs

    def poll(self, timeout: float = -1) -> Message | None:
        try:
            msg: Message | None = self._c.poll(timeout)
        except Exception as exc:
            raise_translated(exc, action=f"poll as {self.what}")
        return msg

    # -- positions and offsets ---------------------------------------------------------------

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        try:
            return list(self._c.position(partitions))
        except Exception as exc:
            raise_translated(exc, action=f"read the positions of {_names(partitions)}")

    def committed(self, partitions: Sequence[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        try:
            return list(self._c.committed(partitions, timeout=timeout))
        except Exception as exc:
            raise_translated(exc, action=f"read the committed offsets of {_names(partitions)}")

    def commit(self, message: Message | None = None, *, offsets: Sequence[TopicPartition] | None = None,
               asynchronous: bool = True) -> list[TopicPartition] | None:
        kwargs: dict[str, Any] = {"asynchronous": asynchronous}
        if message is not None:
            kwargs["message"] = message
        if offsets is not None:
            kwargs["offsets"] = offsets
        try:
            done: list[TopicPartition] | None = self._c.commit(**kwargs)
        except Exception as exc:
            raise_translated(exc, action=f"commit offsets as {self.what}")
        return done

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float = -1,
                              cached: bool = False) -> tuple[int, int]:
        try:
            low, high = self._c.get_watermark_offsets(partition, timeout=timeout, cached=cached)
        except Exception as exc:
            raise_translated(exc, action=f"read the watermarks of {partition.topic}:{partition.partition}")
        return int(low), int(high)

    def offsets_for_times(self, partitions: Sequence[TopicPartition],
                          timeout: float = -1) -> list[TopicPartition]:
        try:
            return list(self._c.offsets_for_times(partitions, timeout=timeout))
        except Exception as exc:
            raise_translated(exc, action=f"look up offsets by time in {_names(partitions)}")

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """The cluster's metadata (of ``topic`` only when given)."""
        try:
            return self._c.list_topics(topic, timeout=timeout)
        except Exception as exc:
            raise_translated(exc, action="read cluster metadata" if topic is None
                             else f"read the metadata of topic {topic!r}")

    def consumer_group_metadata(self) -> Any:
        try:
            return self._c.consumer_group_metadata()
        except Exception as exc:
            raise_translated(exc, action=f"read the group metadata of {self.what}")

    def close(self) -> None:
        try:
            self._c.close()
        except Exception as exc:
            raise_translated(exc, action=f"close {self.what}")


class ShareConsumer:
    """A share-group member (KIP-932; librdkafka's ``ShareConsumer``, or the fake's) whose calls
    raise kafeed errors."""

    __slots__ = ("_c", "what")

    def __init__(self, client: Any, *, what: str = "a share consumer") -> None:
        self._c = client
        self.what = what

    def subscribe(self, topics: Sequence[str]) -> None:
        try:
            self._c.subscribe(list(topics))
        except Exception as exc:
            raise_translated(exc, action=f"subscribe to {', '.join(map(repr, topics))}")

    def poll(self, timeout: float = -1) -> list[Message]:
        """The records fetched (each locked to this member until acknowledged); some may carry
        an error (:func:`message_event`)."""
        try:
            msgs: list[Message] = self._c.poll(timeout)
        except Exception as exc:
            raise_translated(exc, action=f"fetch records as {self.what}")
        return msgs

    def acknowledge(self, message: Message, kind: Any = None) -> None:
        try:
            if kind is None:
                self._c.acknowledge(message)
            else:
                self._c.acknowledge(message, kind)
        except Exception as exc:
            raise_translated(exc, action=f"acknowledge a record as {self.what}")

    def commit_async(self) -> None:
        try:
            self._c.commit_async()
        except Exception as exc:
            raise_translated(exc, action=f"commit acknowledgements as {self.what}")

    def commit_sync(self, timeout: float = -1) -> dict[TopicPartition, Any]:
        """``{partition: error or None}`` of the acknowledgements sent."""
        try:
            return dict(self._c.commit_sync(timeout) or {})
        except Exception as exc:
            raise_translated(exc, action=f"commit acknowledgements as {self.what}")

    def close(self) -> None:
        try:
            self._c.close()
        except Exception as exc:
            raise_translated(exc, action=f"close {self.what}")
