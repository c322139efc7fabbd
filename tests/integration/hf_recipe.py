"""The Hugging Face side of the Trainer recipe tests: a tiny GPT-2 trainer as a restarted job
builds it. Imported inside the tests, so that collecting them does not import transformers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback, TrainingArguments

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.integrations.hf import KafeedTrainer
from tests.integration.recipe_support import SEQ_LEN, Crash, recipe_dataset

STEPS = 6  # optimizer steps, of two batches each (gradient accumulation)


def tiny_gpt2() -> GPT2LMHeadModel:
    return GPT2LMHeadModel(GPT2Config(vocab_size=512, n_positions=SEQ_LEN + 1, n_embd=32, n_layer=1,
                                      n_head=2))


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
    model = tiny_gpt2()

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


def bare_trainer(loader: Any, out: Path, **kwargs: Any) -> KafeedTrainer:
    """A KafeedTrainer with default TrainingArguments (no max_steps), for the refusals."""
    args = TrainingArguments(output_dir=str(out), report_to="none", use_cpu=True)
    return KafeedTrainer(model=tiny_gpt2(), args=args, train_loader=loader, **kwargs)
