"""Topic administration against any cluster: create, list, describe, delete."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.connect import check_reachable
from kafeed.errors import BrokerUnavailable, KafeedError, TopicError, translate_kafka_error
from kafeed.topics.plan import TopicPlan

log = logging.getLogger("kafeed")


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]
    high_watermark: int
    size_bytes: int | None


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]

    @property
    def replication(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["replication"] = self.replication
        return out


def admin_client(settings: ConnectionSettings) -> Any:
    from confluent_kafka.admin import AdminClient

    conf = settings.client_config()
    conf["logger"] = logging.getLogger("kafeed.librdkafka")
    return AdminClient(conf)


class TopicAdmin:
    """Topic operations on the cluster that ``settings`` points at."""

    def __init__(self, settings: ConnectionSettings, *, timeout: float = 15.0) -> None:
        # Fail in milliseconds, naming the cause, rather than after a metadata timeout.
        check_reachable(settings)
        self.settings = settings
        self.timeout = timeout
        self._admin = admin_client(settings)

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            return self._admin.list_topics(topic=topic, timeout=self.timeout)
        except Exception as exc:  # librdkafka raises KafkaException
            raise translate_kafka_error(exc, action="read cluster metadata") from exc

    def broker_count(self) -> int:
        return len(self._metadata().brokers)

    def list(self, *, internal: bool = False) -> list[str]:
        names = self._metadata().topics
        return sorted(t for t in names if internal or not t.startswith("__"))

    def exists(self, name: str) -> bool:
        return name in self._metadata().topics

    def create(self, plan: TopicPlan, *, exist_ok: bool = False) -> bool:
        """Create the topic; False (with ``exist_ok``) when it already existed."""
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewTopic

        new = NewTopic(plan.name, num_partitions=plan.partitions,
                       replication_factor=plan.replication, config=plan.configs())
        future = self._admin.create_topics([new], request_timeout=self.timeout)[plan.name]
        try:
            future.result(timeout=self.timeout)
        except Exception as exc:
            err = exc.args[0] if exc.args else None
            if exist_ok and isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise translate_kafka_error(
                exc, action=f"create topic {plan.name!r}", kind=TopicError) from exc
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

    def delete(self, name: str) -> None:
        from confluent_kafka import KafkaError

        future = self._admin.delete_topics([name], request_timeout=self.timeout)[name]
        try:
            future.result(timeout=self.timeout)
        except Exception as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicError(f"Topic {name!r} does not exist, so there is nothing to delete.",
                                 hint="See `kafeed topic list`.", code=err.code()) from exc
            raise translate_kafka_error(exc, action=f"delete topic {name!r}", kind=TopicError) from exc

    def describe(self, name: str, *, sizes: bool = True) -> TopicInfo:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import ConfigResource, OffsetSpec

        meta = self._metadata(name).topics.get(name)
        if meta is None or meta.error is not None:
            raise TopicError(
                f"Topic {name!r} does not exist.", hint="See `kafeed topic list`.",
                code=None if meta is None or meta.error is None else meta.error.code(),
            )
        parts = sorted(meta.partitions.values(), key=lambda p: p.id)
        for attempt in range(6):
            try:
                offsets = self._admin.list_offsets(
                    {TopicPartition(name, p.id): OffsetSpec.latest() for p in parts},
                    request_timeout=self.timeout,
                )
                hw = {tp.partition: f.result(timeout=self.timeout).offset
                      for tp, f in offsets.items()}
                res = ConfigResource(ConfigResource.Type.TOPIC, name)
                entries = self._admin.describe_configs(
                    [res], request_timeout=self.timeout)[res].result(timeout=self.timeout)
                break
            except Exception as exc:
                # Leadership moves right after creation or a broker loss: retry those.
                if attempt < 5 and _transient(exc):
                    time.sleep(0.2 * 2**attempt)
                    continue
                raise translate_kafka_error(
                    exc, action=f"describe topic {name!r}", kind=TopicError) from exc
        configs = {k: v.value for k, v in entries.items() if not v.is_default and v.value is not None}
        size_map = log_dir_sizes(self.settings, name) if sizes else {}
        return TopicInfo(
            name=name,
            partitions=[
                PartitionInfo(
                    partition=p.id, leader=p.leader if p.leader >= 0 else None,
                    replicas=list(p.replicas), isr=list(p.isrs),
                    high_watermark=hw.get(p.id, -1), size_bytes=size_map.get(p.id),
                )
                for p in parts
            ],
            configs=configs,
        )


def _transient(exc: BaseException) -> bool:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    if not isinstance(err, KafkaError):
        return False
    return bool(err.retriable()) or err.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    )


def run_kafka_tool(settings: ConnectionSettings, tool: str, args: list[str], *,
                   timeout: float = 60.0) -> str | None:
    """Stdout of one of Kafka's Java admin tools against ``settings``' cluster, or None.

    Needs the cached Kafka jars and a PLAINTEXT listener; what these tools add
    (sizes on disk, the quorum leader) is informative, so callers show "n/a"
    rather than fail when this returns None.
    """
    from kafeed.broker.fetch import resolve_libs

    if settings.security_protocol != "PLAINTEXT":
        return None
    try:
        libs = resolve_libs(fetch=False)
    except KafeedError:
        return None
    cmd = [libs.java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", libs.classpath,
           f"org.apache.kafka.tools.{tool}", "--bootstrap-server", settings.bootstrap, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("%s failed: %s", tool, exc)
        return None
    return proc.stdout if proc.returncode == 0 else None


def describe_log_dirs(settings: ConnectionSettings, *, topics: list[str] | None = None,
                      timeout: float = 60.0) -> list[dict[str, Any]] | None:
    """Kafka's LogDirsCommand ``--describe``: its ``brokers`` list, or None when it cannot run."""
    args = ["--describe"] + (["--topic-list", ",".join(topics)] if topics else [])
    out = run_kafka_tool(settings, "LogDirsCommand", args, timeout=timeout)
    return None if out is None else parse_log_dirs_output(out)


def quorum_leader(settings: ConnectionSettings, *, timeout: float = 30.0) -> int | None:
    """The KRaft quorum leader (the active controller) from MetadataQuorumCommand, or None.

    DescribeCluster cannot tell: under KRaft, brokers answer it with any live broker.
    """
    out = run_kafka_tool(settings, "MetadataQuorumCommand", ["describe", "--status"], timeout=timeout)
    match = re.search(r"^LeaderId:\s*(-?\d+)", out or "", re.M)
    return int(match.group(1)) if match and int(match.group(1)) >= 0 else None


def parse_log_dirs_output(text: str) -> list[dict[str, Any]]:
    """The ``brokers`` list of LogDirsCommand's output (one JSON line among status lines)."""
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                brokers: list[dict[str, Any]] = json.loads(line).get("brokers", [])
            except ValueError:
                continue
            return brokers
    return []


def log_dir_sizes(settings: ConnectionSettings, topic: str) -> dict[int, int]:
    """Bytes on disk per partition (largest replica); ``{}`` when they cannot be read."""
    sizes: dict[int, int] = {}
    for broker in describe_log_dirs(settings, topics=[topic]) or []:
        for logdir in broker.get("logDirs", []):
            for part in logdir.get("partitions", []):
                name, _, idx = part["partition"].rpartition("-")
                if name == topic:
                    sizes[int(idx)] = max(sizes.get(int(idx), 0), int(part["size"]))
    return sizes


def ensure_reachable(settings: ConnectionSettings, timeout: float = 10.0) -> int:
    """Return the number of brokers, or raise :class:`BrokerUnavailable` in one sentence."""
    try:
        return TopicAdmin(settings, timeout=timeout).broker_count()
    except BrokerUnavailable:
        raise
    except KafeedError as exc:
        raise BrokerUnavailable(str(exc)) from exc
