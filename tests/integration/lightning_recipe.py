"""The Lightning side of the recipe tests: a tiny module and a fit as a restarted job builds
them. Imported inside the tests, so that collecting them does not import Lightning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.integrations.lightning import KafeedDataModule
from tests.integration.recipe_support import Crash, recipe_dataset

STEPS = 12


class CrashAt(pl.Callback):
    """Dies as step ``step + 1`` begins: its batch is fetched (and the next one ahead), never trained on."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            raise Crash


class TinyLM(pl.LightningModule):
    def __init__(self, seen: list[list[list[int]]]) -> None:
        super().__init__()
        self.seen = seen
        self.net = torch.nn.Sequential(torch.nn.Embedding(512, 16), torch.nn.Linear(16, 512))

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.seen.append(batch["input_ids"].tolist())
        logits = self.net(batch["input_ids"])
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(kafka: ConnectionSettings, topic: str, ckpt_dir: Path, seen: list[list[list[int]]],
        *, ckpt_path: Path | None = None, crash_at: int | None = None) -> None:
    """A fresh Lightning Trainer, module and datamodule, as a restarted job builds them;
    ``seen`` gets the input_ids of every batch trained on."""
    torch.manual_seed(0)
    dataset = recipe_dataset(kafka, topic)
    callbacks: list[pl.Callback] = [ModelCheckpoint(dirpath=ckpt_dir, every_n_train_steps=4, save_top_k=-1)]
    if crash_at is not None:
        callbacks.append(CrashAt(crash_at))
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False, callbacks=callbacks,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(TinyLM(seen), datamodule=KafeedDataModule(kafeed.StreamLoader(dataset, batch_size=4)),
                ckpt_path=ckpt_path)
