"""The global model topic: version after version, each one chunked blob (``v<N>``).

A version's meta names its round, the sites whose updates made it (each with the round it
trained for and its sample count) and whether it is the job's last. The coordinator writes a
version in the same transaction as the round log's record and the offsets of the updates it
used; a site follows the topic (:class:`GlobalFollower`) and trains on the newest version.

With secure aggregation the coordinator also writes the round's control messages here (blobs
without arrays whose meta has a ``kind``: ``roster``, ``received``, ``attempt``), since the
global topic is the one topic every site may read; the follower keeps those of the open round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kafeed.federate.blobs import Blob, BlobAssembler, encode_arrays, produce_blob
from kafeed.kafka import KafkaClients, message_event
from kafeed.kafka.reading import reader_config


@dataclass(frozen=True)
class GlobalVersion:
    """One global model: its version, weights, meta and when it was published."""

    version: int
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]
    timestamp_ms: int
    offset: int
    size: int

    @property
    def final(self) -> bool:
        return bool(self.meta.get("final"))


def version_of(blob: Blob) -> GlobalVersion:
    arrays, meta = blob.arrays()
    return GlobalVersion(int(meta["version"]), arrays, meta, blob.timestamp_ms, blob.first_offset,
                         len(blob.data))


def publish_control(producer: Any, topic: str, kind: str, round_: int, attempt: int,
                    meta: Mapping[str, Any]) -> None:
    """A control message of round ``round_`` into the caller's open transaction."""
    body = {**meta, "kind": kind, "round": round_, "attempt": attempt}
    produce_blob(producer, topic, f"{kind}{round_}.{attempt}", encode_arrays({}, body))


def publish_global(producer: Any, topic: str, version: int, arrays: Mapping[str, np.ndarray],
                   meta: Mapping[str, Any]) -> int:
    """Produce version ``version`` into the caller's open transaction; returns its size in bytes."""
    data = encode_arrays(arrays, {**meta, "version": version})
    produce_blob(producer, topic, f"v{version}", data)
    return len(data)


class GlobalFollower:
    """Reads the global topic from its start, keeping the newest whole version."""

    def __init__(self, clients: KafkaClients, topic: str, *, group_prefix: str = "kafeed-reader-") -> None:
        from kafeed.kafka.types import OFFSET_BEGINNING, TopicPartition

        self.topic = topic
        conf = reader_config()
        conf["group.id"] = group_prefix + conf["group.id"].removeprefix("kafeed-reader-")
        self._consumer = clients.read_committed_consumer(conf, stage="federate")
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self._assembler = BlobAssembler(what="the global model")
        self.latest: GlobalVersion | None = None
        #: the control messages' meta written after the newest version, in order
        self.controls: list[dict[str, Any]] = []
        self.at_end = False

    def poll(self, timeout_s: float = 0.5) -> GlobalVersion | None:
        """Read what has arrived; the newest version known (None before the first)."""
        newest: Blob | None = None
        for msg in self._consumer.consume(num_messages=500, timeout=timeout_s):
            err = msg.error()
            if err is not None:
                self.at_end = message_event(err, action=f"read the global model {self.topic!r}") == "end"
                continue
            self.at_end = False
            blob = self._assembler.add(msg)
            if blob is None:
                continue
            if "kind" in (meta := blob.meta()):
                self.controls.append(meta)
            else:
                newest = blob
                self.controls = []
        if newest is not None:
            self.latest = version_of(newest)
        return self.latest

    def read_to_end(self, timeout_s: float = 30.0) -> GlobalVersion | None:
        """The newest version as of now (polls until the end of the topic)."""
        import time

        deadline = time.monotonic() + timeout_s
        self.at_end = False
        while not self.at_end and time.monotonic() < deadline:
            self.poll(0.5)
        return self.latest

    def close(self) -> None:
        self._consumer.close()
