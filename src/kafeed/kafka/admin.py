"""The typed admin client: librdkafka's ``AdminClient`` whose calls and futures raise kafeed's errors.

:class:`Admin` wraps the client :class:`~kafeed.kafka.KafkaClients` builds (or the fake's)
method for method. A request librdkafka refuses at once raises a
:class:`~kafeed.errors.KafeedError`; the futures a request returns are futures of the same
keys whose ``result()`` raises one (librdkafka's code kept, the ``KafkaException`` as its
cause), worded for the key: ``Could not create topic 'raw': ...``. Topic requests fail as
:class:`~kafeed.errors.TopicError` (:class:`~kafeed.errors.TopicExists`,
:class:`~kafeed.errors.UnknownTopic` where the code says so), others as
:class:`~kafeed.errors.KafkaOperationError` (:class:`~kafeed.errors.NotAuthorized` for an ACL
refusal), a cluster that does not answer as :class:`~kafeed.errors.BrokerUnavailable`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from kafeed.errors import KafkaOperationError, TopicError
from kafeed.kafka.translate import kafka_error, raise_translated, translate_kafka_error

K = TypeVar("K", bound=Hashable)


def _translated(future: Future[Any], action: str, kind: type[KafkaOperationError]) -> Future[Any]:
    """A future of ``future``'s outcome, librdkafka's exception translated."""
    out: Future[Any] = Future()

    def settle(done: Future[Any]) -> None:
        if done.cancelled():
            out.cancel()
            return
        exc = done.exception()
        if exc is None:
            out.set_result(done.result())
        elif kafka_error(exc) is None:
            out.set_exception(exc)
        else:
            failure = translate_kafka_error(exc, action=action, kind=kind)
            failure.__cause__ = exc
            out.set_exception(failure)

    future.add_done_callback(settle)
    return out


def _resource(res: Any) -> str:
    kind = getattr(getattr(res, "restype", None), "name", "resource").lower()
    return f"{kind} {res.name!r}"


class Admin:
    """An admin client whose calls and futures raise kafeed errors (see the module docstring)."""

    __slots__ = ("_a",)

    def __init__(self, client: Any) -> None:
        self._a = client

    def _request(self, name: str, first: Any, action: Callable[[Any], str], *,
                 kind: type[KafkaOperationError] = KafkaOperationError,
                 **kwargs: Any) -> dict[Any, Future[Any]]:
        try:
            futures: Mapping[Any, Future[Any]] = getattr(self._a, name)(first, **kwargs)
        except Exception as exc:
            raise_translated(exc, action=action(None), kind=kind)
        return {key: _translated(f, action(key), kind) for key, f in futures.items()}

    def poll(self, timeout: float = 0) -> None:
        """Serve the client's pending callbacks (its error callback among them)."""
        self._a.poll(timeout)

    # -- metadata ----------------------------------------------------------------------------

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """The cluster's metadata (of ``topic`` only when given)."""
        try:
            return self._a.list_topics(topic=topic, timeout=timeout)
        except Exception as exc:
            raise_translated(exc, action="read cluster metadata" if topic is None
                             else f"read the metadata of topic {topic!r}")

    def describe_cluster(self, **kwargs: Any) -> Future[Any]:
        try:
            future: Future[Any] = self._a.describe_cluster(**kwargs)
        except Exception as exc:
            raise_translated(exc, action="describe the cluster")
        return _translated(future, "describe the cluster", KafkaOperationError)

    def describe_topics(self, topics: Any, **kwargs: Any) -> dict[str, Future[Any]]:
        return self._request("describe_topics", topics,
                             lambda t: "describe topics" if t is None else f"describe topic {t!r}",
                             kind=TopicError, **kwargs)

    # -- topics and records ------------------------------------------------------------------

    def create_topics(self, new_topics: Sequence[Any], **kwargs: Any) -> dict[str, Future[None]]:
        return self._request("create_topics", new_topics,
                             lambda t: "create topics" if t is None else f"create topic {t!r}",
                             kind=TopicError, **kwargs)

    def delete_topics(self, topics: Sequence[str], **kwargs: Any) -> dict[str, Future[None]]:
        return self._request("delete_topics", topics,
                             lambda t: "delete topics" if t is None else f"delete topic {t!r}",
                             kind=TopicError, **kwargs)

    def delete_records(self, partitions: Sequence[Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        return self._request(
            "delete_records", partitions,
            lambda tp: "delete records" if tp is None
            else f"delete records of {tp.topic!r} partition {tp.partition}",
            kind=TopicError, **kwargs)

    def list_offsets(self, requests: Mapping[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        return self._request(
            "list_offsets", requests,
            lambda tp: "read partition offsets" if tp is None
            else f"read the offsets of {tp.topic}:{tp.partition}", **kwargs)

    # -- configs -----------------------------------------------------------------------------

    def describe_configs(self, resources: Sequence[Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        return self._request(
            "describe_configs", resources,
            lambda r: "describe configs" if r is None else f"describe {_resource(r)}",
            kind=TopicError, **kwargs)

    def incremental_alter_configs(self, resources: Sequence[Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        return self._request(
            "incremental_alter_configs", resources,
            lambda r: "alter configs" if r is None else f"configure {_resource(r)}", **kwargs)

    # -- groups ------------------------------------------------------------------------------

    def list_consumer_groups(self, **kwargs: Any) -> Future[Any]:
        try:
            future: Future[Any] = self._a.list_consumer_groups(**kwargs)
        except Exception as exc:
            raise_translated(exc, action="list consumer groups")
        return _translated(future, "list consumer groups", KafkaOperationError)

    def describe_consumer_groups(self, groups: Sequence[str], **kwargs: Any) -> dict[str, Future[Any]]:
        return self._request(
            "describe_consumer_groups", groups,
            lambda g: "describe consumer groups" if g is None else f"describe consumer group {g!r}",
            **kwargs)

    def alter_consumer_group_offsets(self, requests: Sequence[Any], **kwargs: Any) -> dict[str, Future[Any]]:
        """Set groups' committed offsets (``ConsumerGroupTopicPartitions`` requests)."""
        return self._request(
            "alter_consumer_group_offsets", requests,
            lambda g: "set consumer group offsets" if g is None else f"set the offsets of group {g!r}",
            **kwargs)

    # -- ACLs --------------------------------------------------------------------------------

    def create_acls(self, acls: Sequence[Any], **kwargs: Any) -> dict[Any, Future[None]]:
        return self._request("create_acls", acls, lambda _: "create ACLs", **kwargs)

    def describe_acls(self, acl_filter: Any, **kwargs: Any) -> Future[Any]:
        try:
            future: Future[Any] = self._a.describe_acls(acl_filter, **kwargs)
        except Exception as exc:
            raise_translated(exc, action="describe ACLs")
        return _translated(future, "describe ACLs", KafkaOperationError)

    def delete_acls(self, acl_filters: Sequence[Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        return self._request("delete_acls", acl_filters, lambda _: "delete ACLs", **kwargs)
