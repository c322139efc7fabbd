"""The one dead-letter header schema, used by every stage (docs/dead-letters.md).

A dead letter keeps the original key and value (cut to fit, see :func:`fit_value`)
and says why in headers that are all UTF-8 text:

``kafeed.error.kind``       a short word to count by (``decode``, ``oversize``, ...)
``kafeed.error.reason``     one sentence for a person
``kafeed.error.stage``      the stage that gave up on it (``ingest``, ``prepare``, ``loader``, ...)
``kafeed.source.topic``     where a record read from Kafka came from,
``kafeed.source.partition`` ... its partition
``kafeed.source.offset``    ... and offset
``kafeed.error.truncated``  only when the value was cut: the original value's length in bytes

A stage may add its own headers after these (ingest: ``kafeed.source`` file,
``kafeed.line``/``kafeed.row``, ``kafeed.job``); a record's own headers follow last.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafeed.kafka.producer import RECORD_OVERHEAD

Headers = list[tuple[str, bytes]]

KIND = "kafeed.error.kind"
REASON = "kafeed.error.reason"
STAGE = "kafeed.error.stage"
SOURCE_TOPIC = "kafeed.source.topic"
SOURCE_PARTITION = "kafeed.source.partition"
SOURCE_OFFSET = "kafeed.source.offset"
TRUNCATED = "kafeed.error.truncated"



def dead_letter_headers(
    *, kind: str, reason: str, stage: str, source: tuple[str, int, int] | None = None,
    extra: Iterable[tuple[str, bytes]] = (),
) -> Headers:
    """The schema's headers; ``source`` is (topic, partition, offset) for a record read from Kafka."""
    headers: Headers = [(KIND, kind.encode()), (REASON, reason.encode("utf-8", "replace")),
                        (STAGE, stage.encode())]
    if source is not None:
        topic, partition, offset = source
        headers += [(SOURCE_TOPIC, topic.encode()), (SOURCE_PARTITION, str(partition).encode()),
                    (SOURCE_OFFSET, str(offset).encode())]
    headers.extend(extra)
    return headers


def fit_value(value: bytes | None, headers: Headers, max_message_bytes: int) -> bytes | None:
    """``value`` cut to what the dead-letter topic accepts; a cut adds the ``truncated`` header."""
    room = max(0, max_message_bytes - RECORD_OVERHEAD - sum(len(k) + len(v) for k, v in headers))
    if value is None or len(value) <= room:
        return value
    headers.append((TRUNCATED, str(len(value)).encode()))
    return value[:room]
