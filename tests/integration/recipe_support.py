"""What the training-framework recipe tests (Hugging Face, Lightning) share: the token dataset
they train on, the crash that cuts a run short, and the checks every recipe must pass."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest

import kafeed
from kafeed.config import ConnectionSettings
from tests.integration.loader_data import produce_samples
from tests.kafka_fixtures import TopicFactory

SEQ_LEN = 15


class Crash(Exception):
    """Raised by a test callback to cut a run short, as a killed job would be."""


def recipe_dataset(kafka: ConnectionSettings, topic: str) -> kafeed.KafkaTokenDataset:
    """The shuffled token dataset both recipes train on: the same batches run after run."""
    return kafeed.KafkaTokenDataset(topic, seq_len=SEQ_LEN, eos_id=0, connection=kafka, shuffle_buffer=32,
                                    seed=3)


def assert_distinct_batches(batches: list[list[list[int]]], count: int) -> None:
    assert len(batches) == count
    assert len({json.dumps(batch) for batch in batches}) == count  # no batch twice


def assert_samples_topic_refused(kafka: ConnectionSettings, make_topic: TopicFactory,
                                 train: Callable[[str], object]) -> None:
    """``train(topic)`` on a topic of TrainingSample records stops with one schema sentence."""
    topic = make_topic(partitions=1)
    produce_samples(kafka.bootstrap, topic, 200)
    with pytest.raises(kafeed.SchemaError) as err:
        train(topic)
    assert err.value.message.startswith(f"Topic {topic!r} does not hold TokenizedDocument records")
    assert "\n" not in err.value.message


def assert_import_names_the_extra(module: str, framework: str, extra: str) -> None:
    """Importing ``module`` where ``framework`` cannot be imported names the extra to install."""
    code = (f"import sys\nsys.modules[{framework!r}] = None\n"
            "from kafeed.extras import MissingExtra\n"
            f"try:\n    import {module}\n"
            "except MissingExtra as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"This needs {framework}, which is not installed." in out.stdout
    assert f"pip install 'kafeed[{extra}]'" in out.stdout
