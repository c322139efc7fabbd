"""A global model through the training cluster: one blob of ``--mb`` megabytes written as chunk
records in one transaction, then read back ``read_committed`` and reassembled (count, size and
SHA-256 checked), as the coordinator publishes a version and a site reads it.

    PYTHONPATH=src python benchmarks/bench_federate_transport.py --mb 100

Prints JSON: the blob's size, its chunk count, seconds to write and commit, seconds to read and
reassemble, and the round trip in MB/s. With ``--bootstrap`` it uses a running broker instead
of starting a LocalCluster.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.federate.blobs import BlobAssembler, chunk_count, encode_arrays, produce_blob
from kafeed.kafka import KafkaClients
from kafeed.kafka.reading import reader_config
from kafeed.topics import TopicAdmin, plan_topic


def run(connection: ConnectionSettings, topic: str, megabytes: float) -> dict[str, Any]:
    floats = int(megabytes * 1e6 / 4)
    weights = np.random.default_rng(0).standard_normal(floats, dtype=np.float32)
    data = encode_arrays({"w": weights}, {"version": 1})
    clients = KafkaClients(connection)
    producer = clients.transactional_producer(transactional_id=f"bench-{uuid.uuid4().hex[:8]}",
                                              stage="bench", config={"linger.ms": 20})
    producer.init()
    started = time.perf_counter()
    producer.begin()
    chunks = produce_blob(producer, topic, "v1", data)
    producer.commit()
    written = time.perf_counter() - started

    from kafeed.kafka.types import OFFSET_BEGINNING, TopicPartition

    consumer = clients.read_committed_consumer(reader_config())
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    assembler = BlobAssembler(what="bench")
    blob = None
    while blob is None:
        for msg in consumer.consume(num_messages=500, timeout=1.0):
            if msg.error() is None:
                blob = assembler.add(msg) or blob
    read = time.perf_counter() - started
    consumer.close()
    if blob.data != data:
        raise SystemExit("the blob read back differs from the one written")
    return {"mb": round(len(data) / 1e6, 3), "chunks": chunks, "expected_chunks": chunk_count(len(data)),
            "write_commit_s": round(written, 3), "read_reassemble_s": round(read, 3),
            "round_trip_mb_s": round(2 * len(data) / 1e6 / (written + read), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    cluster = None
    if args.bootstrap is None:
        cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="bench-fed-")), nodes=1, port=free_port_block(2),
                               heap_mb=1024, jit="quick")
        cluster.start(timeout=180)
    try:
        connection = ConnectionSettings(bootstrap=args.bootstrap or cluster.bootstrap)  # type: ignore[union-attr]
        topic = f"bench-fed-{uuid.uuid4().hex[:8]}"
        TopicAdmin(connection).create(plan_topic(topic, brokers=1, partitions=1))
        print(json.dumps(run(connection, topic, args.mb)))
    finally:
        if cluster is not None:
            cluster.stop(timeout=15, purge=True)


if __name__ == "__main__":
    main()
