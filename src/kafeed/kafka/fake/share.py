"""The fake cluster's share consumer: KIP-932 share-group members, explicitly acknowledged."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafeed.kafka.fake.records import FakeMessage

if TYPE_CHECKING:
    from kafeed.kafka.fake.cluster import FakeKafka


class FakeShareConsumer:
    """Members of one ``group.id`` share the committed records of the topics they subscribe to,
    from the earliest: a delivery is locked to one member until it acknowledges it. ACCEPT and
    REJECT end a record; RELEASE, or closing without acknowledging, hands it out again.
    At most ``max.poll.records`` (default 500) per ``poll``."""

    def __init__(self, fake: FakeKafka, conf: Mapping[str, Any]) -> None:
        self._fake = fake
        self.group = str(conf.get("group.id", ""))
        self._limit = int(conf.get("max.poll.records", 500))
        self._topics: list[str] = []
        self.acknowledged: list[tuple[tuple[str, int, int], str]] = []  # (record, ACCEPT/RELEASE/REJECT)

    def subscribe(self, topics: Sequence[str]) -> None:
        self._topics = list(topics)

    def poll(self, timeout: float = -1) -> list[Any]:
        self._fake.check("poll")
        if self._fake.stalled("poll"):
            return []
        deadline = time.monotonic() + max(timeout, 0)
        with self._fake.changed:
            while True:
                out = self._take()
                left = deadline - time.monotonic()
                if out or left <= 0:
                    return out
                self._fake.changed.wait(left)

    def _take(self) -> list[Any]:
        acked = self._fake.share_acked.setdefault(self.group, set())
        locked = self._fake.share_locked.setdefault(self.group, {})
        out: list[Any] = []
        for topic in self._topics:
            for p in range(len(self._fake.topics.get(topic, []))):
                for r in self._fake.log(topic, p)[:self._fake.stable(topic, p)]:
                    where = (topic, p, r.offset)
                    if (r.marker or (r.txn is not None and r.txn.state != "committed")
                            or where in acked or where in locked):
                        continue
                    locked[where] = self
                    out.append(FakeMessage(topic, p, r.offset, r.key, r.value, r.headers, r.timestamp))
                    if len(out) >= self._limit:
                        return out
        return out

    def acknowledge(self, message: Any, kind: Any = None) -> None:
        where = (message.topic(), message.partition(), message.offset())
        name = getattr(kind, "name", "ACCEPT")
        with self._fake.changed:
            self._fake.share_locked.setdefault(self.group, {}).pop(where, None)
            if name != "RELEASE":
                self._fake.share_acked.setdefault(self.group, set()).add(where)
            self.acknowledged.append((where, name))
            self._fake.changed.notify_all()

    def commit_async(self) -> None:
        self._fake.check("commit_async")

    def commit_sync(self, timeout: float = -1) -> dict[Any, Any]:
        self._fake.check("commit_sync")
        return {}

    def close(self) -> None:
        with self._fake.changed:
            locked = self._fake.share_locked.setdefault(self.group, {})
            for where in [w for w, member in locked.items() if member is self]:
                del locked[where]
            self._fake.changed.notify_all()
