"""Which site records a checkpoint trained on: its token offset ranges read back from Kafka.

A checkpoint's lineage names offset ranges of the token topic. Each token record that
``kafeed prepare`` made from a mirrored record keeps its site record in the metadata key
``kafeed.mirror.origin`` (:mod:`kafeed.mirror.origin`), so reading those ranges names,
per document, the site, the site's topic, partition and offset. Documents prepared
from topics that were not mirrored have no origin and are counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.mirror.origin import ORIGIN_HEADER, Origin, parse_origin
from kafeed.schema.records_pb2 import TokenizedDocument

#: ``{"topic:partition": [[start, end), ...]}``, as a checkpoint's lineage names token ranges.
TokenRanges = dict[str, list[tuple[int, int]]]


@dataclass
class SiteLineage:
    """The site records behind a set of token records, per document."""

    documents: list[tuple[str, Origin]] = field(default_factory=list)  # (document id, its site record)
    without_origin: int = 0

    def as_dict(self) -> dict[str, Any]:
        sites: dict[str, int] = {}
        for _, origin in self.documents:
            sites[origin.site] = sites.get(origin.site, 0) + 1
        return {"sites": dict(sorted(sites.items())), "without_origin": self.without_origin,
                "documents": [{"id": doc_id, "site": o.site, "topic": o.topic, "partition": o.partition,
                               "offset": o.offset} for doc_id, o in self.documents]}


def ranges_of(partitions: dict[str, Any]) -> TokenRanges:
    """The token ranges of a checkpoint lineage's ``partitions`` entry."""
    return {key: [(int(a), int(b)) for a, b in entry["ranges"]] for key, entry in partitions.items()}


def site_lineage(connection: ConnectionSettings, ranges: TokenRanges, *,
                 timeout: float = 60.0) -> SiteLineage:
    """Read the token records in ``ranges`` (read_committed) and collect their site records."""
    found = SiteLineage()
    with KafkaClients(connection).reader(what="lineage reader") as reader:
        for key, spans in sorted(ranges.items()):
            topic, _, partition = key.rpartition(":")
            for start, end in spans:
                if end > start:
                    for msg in reader.read(topic, {int(partition): (start, end)}, timeout_s=timeout,
                                           hint="Check that the topic still holds those offsets "
                                           "(retention) and that the cluster is healthy."):
                        _collect(found, msg.value())
    return found


def _collect(found: SiteLineage, value: bytes | None) -> None:
    doc = TokenizedDocument()
    doc.ParseFromString(value or b"")
    origin = parse_origin(doc.metadata.get(ORIGIN_HEADER, ""))
    if origin is None:
        found.without_origin += 1
    else:
        found.documents.append((doc.id, origin))
