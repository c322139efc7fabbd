"""Topic administration against any cluster: create, list, describe, delete."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, NoReturn

from kafeed.config import ConnectionSettings
from kafeed.connect import check_reachable
from kafeed.errors import BrokerUnavailable, KafeedError, NotAuthorized, TopicError, TopicExists, UnknownTopic
from kafeed.kafka import KafkaClients, security_failure
from kafeed.kafka.translate import is_no_answer, is_transient, metadata_error, refused_connection
from kafeed.topics.describe import TopicInfo, describe_topic
from kafeed.topics.plan import TopicPlan

DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # the broker default of message.max.bytes

log = logging.getLogger("kafeed")


class TopicAdmin:
    """Topic operations on the cluster that ``settings`` points at (through ``clients`` when given,
    e.g. a :class:`~kafeed.kafka.FakeKafka`; else ``settings``' own, after a TCP probe)."""

    def __init__(self, settings: ConnectionSettings, *, timeout: float = 15.0,
                 clients: KafkaClients | None = None) -> None:
        if clients is None:
            # Fail in milliseconds, naming the cause, rather than after a metadata timeout.
            check_reachable(settings)
        self.settings = settings
        self.timeout = timeout
        self._refusal: str | None = None
        self.clients = clients or KafkaClients(settings)
        self._admin = self.clients.admin()

    def _metadata(self, topic: str | None = None) -> Any:
        # In slices: a refused login or certificate ends the wait at once, not at the timeout.
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return self._admin.list_topics(topic=topic, timeout=max(0.1, min(left, 1.0)))
            except KafeedError as exc:
                if time.monotonic() < deadline and is_no_answer(exc) and not self._refused():
                    continue
                self._raise_metadata_error(exc)

    def _refused(self) -> bool:
        self._refusal = self._refusal or security_failure(self._admin, self.settings)
        return self._refusal is not None

    def _raise_metadata_error(self, exc: KafeedError) -> NoReturn:
        refused = self._refusal or security_failure(self._admin, self.settings)
        self._refusal = None
        if refused is not None:
            raise BrokerUnavailable(
                f"Could not read cluster metadata: the broker refused the connection ({refused}).",
                hint="Check the credentials and ssl_ca_location of the [connection] settings "
                "(--config or KAFEED_SASL_*/KAFEED_SSL_CA_LOCATION).") from exc
        if refused_connection(exc) and self.settings.security_protocol == "PLAINTEXT":
            # The TCP probe in __init__ got through: the broker hung up on the protocol.
            raise BrokerUnavailable(
                f"Could not read cluster metadata: {self.settings.bootstrap} accepted the connection "
                "but answered no plaintext request, as a TLS or SASL listener does.",
                hint="A secured cluster needs security_protocol, SASL credentials and a CA: "
                "pass its settings file with --config.") from exc
        raise exc

    def _denied(self, name: str) -> bool:
        """True when the cluster hides ``name`` from this principal (no DESCRIBE ACL)."""
        found = self._metadata(name).topics.get(name)
        return found is not None and found.error is not None and isinstance(
            metadata_error(found.error, action=f"describe topic {name!r}"), NotAuthorized)

    def _missing(self, name: str) -> TopicError:
        if self._denied(name):
            who = self.settings.sasl_username or "this client"
            return TopicError(f"Access to topic {name!r} is denied to {who} by the cluster's ACLs.",
                              hint="Use the settings file of the role that may use it, or grant it "
                              "with `kafeed acl grant ROLE --principal User:NAME`.")
        return TopicError(f"Topic {name!r} does not exist.",
                          hint=f"Create it first: kafeed topic create {name} --partitions N.")

    def broker_count(self) -> int:
        return len(self._metadata().brokers)

    def list(self, *, internal: bool = False) -> list[str]:
        names = self._metadata().topics
        return sorted(t for t in names if internal or not t.startswith("__"))

    def exists(self, name: str) -> bool:
        return name in self._metadata().topics

    def create(self, plan: TopicPlan, *, exist_ok: bool = False) -> bool:
        """Create the topic; False (with ``exist_ok``) when it already existed."""
        from kafeed.kafka.types import NewTopic

        new = NewTopic(plan.name, num_partitions=plan.partitions,
                       replication_factor=plan.replication, config=plan.configs())
        future = self._admin.create_topics([new], request_timeout=self.timeout)[plan.name]
        try:
            future.result(timeout=self.timeout)
        except TopicExists:
            if exist_ok:
                return False
            raise
        self._wait_visible(plan.name, plan.partitions)
        return True

    def _wait_visible(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            meta = self._metadata(name).topics.get(name)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions and all(
                p.leader >= 0 for p in meta.partitions.values()
            ):
                return
            time.sleep(0.1)
        raise TopicError(f"Topic {name!r} was created but has no leaders after {self.timeout}s.")

    def max_message_bytes(self, name: str, *, just_created: bool = False) -> int:
        """The topic's effective ``max.message.bytes`` (default included); TopicError when missing.

        ``just_created``: this client created the topic a moment ago, so a broker whose metadata
        does not list it yet is asked again before the topic counts as missing.
        """
        from kafeed.kafka.types import ConfigResource

        for attempt in range(6 if just_created else 1):
            if self.exists(name):
                break
            if attempt == (5 if just_created else 0):
                raise self._missing(name)
            time.sleep(0.2 * 2**attempt)
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        for attempt in range(6):
            try:
                entries = self._admin.describe_configs([res], request_timeout=self.timeout)[res].result(
                    timeout=self.timeout)
                break
            except KafeedError as exc:
                # On several nodes a topic just created is not yet known to every broker.
                if attempt < 5 and is_transient(exc):
                    time.sleep(0.2 * 2**attempt)
                    continue
                raise
        entry = entries.get("max.message.bytes")
        return int(entry.value) if entry is not None and entry.value else DEFAULT_MAX_MESSAGE_BYTES

    def delete(self, name: str) -> None:
        future = self._admin.delete_topics([name], request_timeout=self.timeout)[name]
        try:
            future.result(timeout=self.timeout)
        except UnknownTopic as exc:
            raise UnknownTopic(f"Topic {name!r} does not exist, so there is nothing to delete.",
                               hint="See `kafeed topic list`.", code=exc.code) from exc

    def delete_records(self, name: str, before: Mapping[int, int], *, wait: bool = True) -> None:
        """Delete the records of ``name`` below ``before[partition]``, which becomes its first offset.

        With ``wait`` False the request is only sent: a failure is logged, not raised.
        """
        from kafeed.kafka.types import TopicPartition

        if not before:
            return
        futures = self._admin.delete_records(
            [TopicPartition(name, p, offset) for p, offset in sorted(before.items())],
            request_timeout=self.timeout)
        for future in futures.values():
            if not wait:
                future.add_done_callback(_log_failed_deletion)
                continue
            future.result(timeout=self.timeout)

    def describe(self, name: str, *, sizes: bool = True) -> TopicInfo:
        """Partitions (leaders, replicas, high watermarks, sizes when ``sizes``) and configs."""
        meta = self._metadata(name).topics.get(name)
        if meta is None or meta.error is not None:
            raise TopicError(
                f"Topic {name!r} does not exist.", hint="See `kafeed topic list`.",
                code=None if meta is None else metadata_error(meta.error, action=f"describe {name}").code,
            )
        return describe_topic(self._admin, self.settings, meta, timeout=self.timeout, sizes=sizes)


def _log_failed_deletion(future: Future[Any]) -> None:
    exc = future.exception()
    if exc is not None:
        log.warning("deleting records failed: %s", exc)


def ensure_reachable(settings: ConnectionSettings, timeout: float = 10.0) -> int:
    """Return the number of brokers, or raise :class:`BrokerUnavailable` in one sentence."""
    try:
        return TopicAdmin(settings, timeout=timeout).broker_count()
    except BrokerUnavailable:
        raise
    except KafeedError as exc:
        raise BrokerUnavailable(str(exc)) from exc
