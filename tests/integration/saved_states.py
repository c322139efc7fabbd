"""The data and loaders behind tests/fixtures/loader_states: the same on every run, so that a
state one kafeed saved resumes on another (tests/integration/test_loader_saved_states.py).

Each case reads ``SAVED_AFTER`` batches, saves the loader's state, and reads ``CHECKED``
more; the fixture keeps the state and those batches. The generator
(tests/fixtures/loader_states/generate.py) runs this with the kafeed whose states are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.loader_data import EOS, produce_docs

TOKENS_TOPIC = "saved-state-tokens"
MIX_TOPIC = "saved-state-mix"
SAVED_AFTER = 7  # batches read before the state is saved
CHECKED = 6  # batches read after it, kept to compare a resume with
BATCH = 4
CASES = ("tokens", "files", "mixture")


def write_files(root: Path) -> None:
    """Three Parquet files of documents whose every token is the document's number."""
    rng = np.random.default_rng(3)
    doc = 0
    for f in range(3):
        rows = []
        for _ in range(40):
            doc += 1
            rows.append([doc] * int(rng.integers(1, 40)))
        table = pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32()))})
        pq.write_table(table, root / f"part-{f}.parquet", row_group_size=13)


def make_data(kafka: ConnectionSettings, files: Path) -> None:
    """The topics (produced keyed, so every partition holds the same records at the same
    offsets on every run) and the files."""
    admin = TopicAdmin(kafka)
    admin.create(plan_topic(TOKENS_TOPIC, brokers=1, partitions=3))
    admin.create(plan_topic(MIX_TOPIC, brokers=1, partitions=2))
    produce_docs(kafka.bootstrap, TOKENS_TOPIC, 300, seed=21)
    produce_docs(kafka.bootstrap, MIX_TOPIC, 200, seed=22)
    files.mkdir(parents=True, exist_ok=True)
    write_files(files)


def loaders(kafka: ConnectionSettings, files: Path) -> dict[str, Callable[[], kafeed.StreamLoader]]:
    """Each case's loader, shuffle buffer on (its RNG and items and the packer's carry are in
    the state)."""
    common: dict[str, Any] = {"seq_len": 15, "eos_id": EOS, "shuffle_buffer": 25, "seed": 5}
    return {
        "tokens": lambda: kafeed.StreamLoader(
            kafeed.KafkaTokenDataset(TOKENS_TOPIC, connection=kafka, **common), batch_size=BATCH),
        "files": lambda: kafeed.StreamLoader(kafeed.FileTokenDataset(files, **common), batch_size=BATCH),
        "mixture": lambda: kafeed.StreamLoader(
            kafeed.Mixture({MIX_TOPIC: 0.5, "corpus": 0.5}, sources={"corpus": {"files": str(files)}},
                           connection=kafka, **common), batch_size=BATCH),
    }


def tokens(batch: Any) -> list[list[int]]:
    return np.asarray(batch["tokens"]).tolist()  # type: ignore[no-any-return]
