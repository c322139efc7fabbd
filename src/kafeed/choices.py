"""The closed sets of values that options take, and the defaults the CLI shows.

Kept free of pydantic, numpy and the Kafka client so that building the command line
(``kafeed --help``) imports nothing heavy; the settings models import them from here.
"""

from __future__ import annotations

from typing import Literal

Compression = Literal["zstd", "lz4", "snappy", "gzip", "none"]
RawFormat = Literal["protobuf", "avro"]
ModelKind = Literal["gpt", "classifier"]
TextMode = Literal["file", "line", "paragraph"]
StdinFormat = Literal["jsonl", "text"]
OffsetReset = Literal["earliest", "latest"]
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
# A local node's JIT: "full" (tiered, G1) for a cluster that serves for hours, "quick" (first
# tier only and the serial collector: about half the CPU to start and serve a short workload)
# for tests and demos.
JitMode = Literal["full", "quick"]

KAFKA_VERSION = "4.4.0"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_PER_PARTITION_MBPS = 10.0
# `kafeed plan`'s per-broker and per-process figures (kafeed.topics.capacity.Capacity).
PLAN_DEFAULTS: dict[str, float] = {
    "broker_net_in_mb_s": 1_000.0,  # ~10 GbE of a 25 GbE NIC
    "broker_net_out_mb_s": 1_500.0,
    "broker_disk_tb": 24.0,  # usable log space per broker
    "max_partition_replicas": 4_000,  # per broker, a common operating guide
    "partition_mb_s": DEFAULT_PER_PARTITION_MBPS,  # what one partition carries comfortably
    "prepare_tokens_per_s": 200_000.0,  # one prepare process (docs/prepare.md)
    "utilisation": 0.6,  # headroom for failover and catch-up
    "readers_per_gpu": 1,  # DataLoader workers per rank
    "consumer_groups": 2,  # trainer + archive
    "raw_bytes_per_token": 4.0,  # text bytes per token on raw; 0: no raw topic
}
DEFAULT_LINGER_MS = 100
DEFAULT_BATCH_BYTES = 1_000_000
DEFAULT_BATCH_MESSAGES = 100_000
