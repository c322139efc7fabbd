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
# A local node's JIT: "full" (tiered) for a cluster that serves for hours, "quick" (first
# tier only: about half the CPU to start and serve a short workload) for tests and demos.
JitMode = Literal["full", "quick"]

KAFKA_VERSION = "4.4.0"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_PER_PARTITION_MBPS = 10.0
DEFAULT_LINGER_MS = 100
DEFAULT_BATCH_BYTES = 1_000_000
DEFAULT_BATCH_MESSAGES = 100_000
