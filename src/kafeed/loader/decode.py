"""Turn consumed messages into token arrays or sample dicts; bad records are skipped.

A bad record (undecodable, tombstone, unknown dtype, token count that does not match the
payload, another tokenizer than asked for) is counted, logged with where it came from,
and produced to the dead-letter topic when one is set. It never stops training.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from kafeed.errors import SchemaError
from kafeed.loader.settings import LoaderSettings
from kafeed.schema.codec import UINT16, UINT32, decode_document, decode_sample, unpack_tokens
from kafeed.schema.records_pb2 import TokenizedDocument

log = logging.getLogger("kafeed")

_DTYPES: dict[int, np.dtype[Any]] = {UINT16: np.dtype("<u2"), UINT32: np.dtype("<u4")}


class RecordDecoder:
    """Decodes for one reader; updates that reader's ``stats`` ("tokens", "bad")."""

    def __init__(self, settings: LoaderSettings, stats: dict[str, int]) -> None:
        self.settings = settings
        self.stats = stats
        self._producer: Any = None

    def decode(self, msg: Any) -> Any:
        """The payload, or ``None`` for a bad record (already counted and dead-lettered)."""
        if self.settings.kind == "tokens":
            # Fast path, the hot loop: parse, check, one np.frombuffer. Anything odd goes
            # through decode_document below, which names the record in its error.
            try:
                doc = TokenizedDocument()
                doc.ParseFromString(msg.value())
                dtype = _DTYPES.get(doc.dtype)
                data = doc.tokens
                tokenizer = self.settings.tokenizer
                if dtype is not None and len(data) == doc.num_tokens * dtype.itemsize and (
                        tokenizer is None or doc.tokenizer == tokenizer):
                    self.stats["tokens"] += doc.num_tokens
                    return np.frombuffer(data, dtype=dtype)
            except Exception:
                pass
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        try:
            if self.settings.kind == "tokens":
                doc = decode_document(msg.value(), topic=topic, partition=partition, offset=offset)
                if self.settings.tokenizer is not None and doc.tokenizer != self.settings.tokenizer:
                    raise SchemaError(
                        f"record {topic}/{partition}@{offset} was tokenized with "
                        f"{doc.tokenizer!r}, not {self.settings.tokenizer!r}.")
                tokens = unpack_tokens(doc.tokens, doc.dtype)
                self.stats["tokens"] += int(tokens.size)
                return tokens
            sample = decode_sample(msg.value(), topic=topic, partition=partition, offset=offset)
            return {
                "id": sample.id, "input": sample.input_data,
                "targets": np.asarray(sample.target_values, dtype=np.float32),
                "metadata": dict(sample.metadata), "source": sample.source,
                "timestamp": sample.timestamp,
            }
        except SchemaError as exc:
            self._bad(msg, exc)
            return None

    def _bad(self, msg: Any, exc: SchemaError) -> None:
        self.stats["bad"] += 1
        log.warning("kafeed loader: skipped a bad record: %s", exc.message)
        if self.settings.dlq_topic is None:
            return
        if self._producer is None:
            from confluent_kafka import Producer

            conf = self.settings.connection.client_config()
            conf["logger"] = logging.getLogger("kafeed.librdkafka")
            self._producer = Producer(conf)
        self._producer.produce(
            self.settings.dlq_topic, value=msg.value(), key=msg.key(),
            headers=[("kafeed.reason", exc.message.encode()),
                     ("kafeed.source", f"{msg.topic()}:{msg.partition()}@{msg.offset()}".encode())])
        self._producer.poll(0)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
