"""The Hugging Face Trainer recipe: a tiny GPT-2 on a token topic, resumed batch for batch.

transformers is imported inside the tests (tests/integration/hf_recipe.py): every test process
collects this file, and only the one that runs it should pay for the import.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import kafeed
from kafeed.config import ConnectionSettings
from tests.integration.loader_data import produce_docs
from tests.integration.recipe_support import (
    SEQ_LEN,
    Crash,
    assert_distinct_batches,
    assert_import_names_the_extra,
    assert_samples_topic_refused,
)
from tests.kafka_fixtures import TopicFactory


def test_a_resumed_trainer_trains_on_exactly_the_batches_of_an_uninterrupted_run(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    from kafeed.integrations.hf import STATE_FILE
    from tests.integration.hf_recipe import STEPS, CrashAt, trainer

    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 300)
    whole: list[list[list[int]]] = []
    trainer(kafka, topic, tmp_path / "whole", whole).train()
    assert_distinct_batches(whole, 2 * STEPS)

    cut = tmp_path / "cut"
    first: list[list[list[int]]] = []
    with pytest.raises(Crash):
        trainer(kafka, topic, cut, first, [CrashAt(4)]).train()
    assert len(first) == 8  # steps 1-4; step 5's batches were taken but not trained on
    assert (cut / "checkpoint-4" / STATE_FILE).exists()
    (cut / "checkpoint-5").mkdir()  # a newer save cut short before the loader state was written

    rest: list[list[list[int]]] = []
    with caplog.at_level(logging.WARNING, logger="kafeed"):
        trainer(kafka, topic, cut, rest).train(resume_from_checkpoint=True)
    assert first + rest == whole
    assert "skipping checkpoint-5" in caplog.text
    state = json.loads((cut / f"checkpoint-{STEPS}" / STATE_FILE).read_text())
    assert state["step"] == STEPS
    assert state == json.loads((tmp_path / "whole" / f"checkpoint-{STEPS}" / STATE_FILE).read_text())


def test_a_topic_of_samples_stops_the_trainer_with_a_schema_error(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    from tests.integration.hf_recipe import trainer

    assert_samples_topic_refused(kafka, make_topic, lambda topic: trainer(kafka, topic, tmp_path, []).train())


def test_a_sample_loader_is_refused_before_training(kafka: ConnectionSettings, tmp_path: Path) -> None:
    from tests.integration.hf_recipe import trainer

    samples = kafeed.KafkaSampleDataset("raw", connection=kafka)
    with pytest.raises(kafeed.ConfigError) as err:
        trainer(kafka, "raw", tmp_path, [], dataset=samples)
    assert "reads TrainingSample records" in err.value.message
    assert err.value.hint is not None and "KafkaTokenDataset" in err.value.hint


def test_a_trainer_without_max_steps_or_with_a_dataset_is_refused(kafka: ConnectionSettings,
                                                                  tmp_path: Path) -> None:
    from tests.integration.hf_recipe import bare_trainer

    loader = kafeed.StreamLoader(kafeed.KafkaTokenDataset("tokens", seq_len=SEQ_LEN, eos_id=0,
                                                          connection=kafka), batch_size=4)
    with pytest.raises(kafeed.ConfigError, match=r"needs TrainingArguments\(max_steps=N\)"):
        bare_trainer(loader, tmp_path)
    with pytest.raises(kafeed.ConfigError, match="takes no train_dataset"):
        bare_trainer(loader, tmp_path, train_dataset=[{"input_ids": [1]}])


def test_without_transformers_the_import_names_the_extra() -> None:
    assert_import_names_the_extra("kafeed.integrations.hf", "transformers", "hf")
