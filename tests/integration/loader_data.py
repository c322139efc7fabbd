"""Test data for the loader: documents whose every token is the document's number.

Document ``i`` holds ``length_i`` copies of ``i + 1`` (end-of-document is 0), so counting
token values in whatever the loader yields tells exactly which documents arrived, how
many times, and whether any token was lost.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
from confluent_kafka import Producer

from kafeed.schema import make_document, make_sample

EOS = 0


def producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                     "logger": logging.getLogger("kafeed.librdkafka")})


def lengths(count: int, seed: int = 0, low: int = 1, high: int = 60) -> np.ndarray:
    return np.random.default_rng(seed).integers(low, high, size=count)


def produce_docs(bootstrap: str, topic: str, count: int, *, seed: int = 0, first: int = 0,
                 low: int = 1, high: int = 60, bad: Iterable[int] = (), partition: int = -1) -> np.ndarray:
    """Produce documents ``first .. first+count-1``; returns expected tokens per value.

    ``partition``: all of them to that partition (-1: the producer's partitioner, by key).

    ``bad`` numbers are produced as undecodable bytes instead (and expected nowhere).
    """
    sizes = lengths(count, seed, low, high)
    expected = np.zeros(first + count + 1, dtype=np.int64)
    bad = set(bad)
    p = producer(bootstrap)
    for i, size in enumerate(sizes):
        doc = first + i
        key = f"doc-{doc}".encode()
        if doc in bad:
            p.produce(topic, key=key, value=b"\xff\xfe not a protobuf")
            continue
        record = make_document(np.full(int(size), doc + 1), id=f"doc-{doc}", vocab_size=65536,
                               tokenizer="test")
        p.produce(topic, key=key, value=record.SerializeToString(), partition=partition)
        expected[doc + 1] = size
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    return expected


def produce_samples(bootstrap: str, topic: str, count: int) -> None:
    p = producer(bootstrap)
    for i in range(count):
        sample = make_sample(f"text {i}", id=f"s-{i}", targets=[float(i % 3)], metadata={"n": str(i)})
        p.produce(topic, key=f"s-{i}".encode(), value=sample.SerializeToString())
    assert p.flush(30) == 0


def counts(batches: Iterable[Any], size: int) -> np.ndarray:
    """Tokens per document value over yielded batches (dicts, tensors or arrays)."""
    total = np.zeros(size, dtype=np.int64)
    for batch in batches:
        tokens = batch["tokens"] if isinstance(batch, dict) else batch
        arr = np.asarray(tokens).ravel()
        total += np.bincount(arr, minlength=size)[:size]
    total[EOS] = 0
    return total
