"""The Hugging Face Trainer recipe: a tiny GPT-2 on a token topic, resumed batch for batch."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback, TrainingArguments

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.integrations.hf import STATE_FILE, KafeedTrainer
from tests.integration.loader_data import produce_docs
from tests.integration.recipe_support import (
    SEQ_LEN,
    Crash,
    assert_distinct_batches,
    assert_import_names_the_extra,
    assert_samples_topic_refused,
    recipe_dataset,
)
from tests.kafka_fixtures import TopicFactory

STEPS = 6  # optimizer steps, of two batches each (gradient accumulation)


class CrashAt(TrainerCallback):
    """Dies as step ``step + 1`` begins: its batches are taken from the loader, never trained on."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.step:
            raise Crash


def trainer(kafka: ConnectionSettings, topic: str, out: Path, seen: list[list[list[int]]],
            callbacks: Sequence[TrainerCallback] = (), dataset: Any = None) -> KafeedTrainer:
    """A fresh trainer, as a restarted job builds it; ``seen`` gets the input_ids of every batch
    the model is run on."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=SEQ_LEN + 1, n_embd=32, n_layer=1,
                                       n_head=2))

    def record(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        seen.append(kwargs["input_ids"].tolist())

    model.register_forward_pre_hook(record, with_kwargs=True)
    dataset = dataset or recipe_dataset(kafka, topic)
    args = TrainingArguments(output_dir=str(out), max_steps=STEPS, save_steps=2,
                             per_device_train_batch_size=4, gradient_accumulation_steps=2,
                             learning_rate=1e-3, logging_strategy="no",
                             report_to="none", use_cpu=True, disable_tqdm=True, seed=0)
    return KafeedTrainer(model=model, args=args, train_loader=kafeed.StreamLoader(dataset, batch_size=4),
                         callbacks=list(callbacks))


def test_a_resumed_trainer_trains_on_exactly_the_batches_of_an_uninterrupted_run(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
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
    assert_samples_topic_refused(kafka, make_topic, lambda topic: trainer(kafka, topic, tmp_path, []).train())


def test_a_sample_loader_is_refused_before_training(kafka: ConnectionSettings, tmp_path: Path) -> None:
    samples = kafeed.KafkaSampleDataset("raw", connection=kafka)
    with pytest.raises(kafeed.ConfigError) as err:
        trainer(kafka, "raw", tmp_path, [], dataset=samples)
    assert "reads TrainingSample records" in err.value.message
    assert err.value.hint is not None and "KafkaTokenDataset" in err.value.hint


def test_a_trainer_without_max_steps_or_with_a_dataset_is_refused(kafka: ConnectionSettings,
                                                                  tmp_path: Path) -> None:
    loader = kafeed.StreamLoader(kafeed.KafkaTokenDataset("tokens", seq_len=SEQ_LEN, eos_id=0,
                                                          connection=kafka), batch_size=4)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=SEQ_LEN + 1, n_embd=32, n_layer=1,
                                       n_head=2))
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    with pytest.raises(kafeed.ConfigError, match=r"needs TrainingArguments\(max_steps=N\)"):
        KafeedTrainer(model=model, args=args, train_loader=loader)
    with pytest.raises(kafeed.ConfigError, match="takes no train_dataset"):
        KafeedTrainer(model=model, args=args, train_loader=loader, train_dataset=[{"input_ids": [1]}])


def test_without_transformers_the_import_names_the_extra() -> None:
    assert_import_names_the_extra("kafeed.integrations.hf", "transformers", "hf")
