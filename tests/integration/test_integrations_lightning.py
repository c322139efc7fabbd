"""The PyTorch Lightning recipe: a LightningDataModule over a token topic, resumed batch for batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.integrations.lightning import KafeedDataModule
from tests.integration.loader_data import produce_docs
from tests.integration.recipe_support import (
    Crash,
    assert_distinct_batches,
    assert_import_names_the_extra,
    assert_samples_topic_refused,
    recipe_dataset,
)
from tests.kafka_fixtures import TopicFactory

STEPS = 12

# pytorch_lightning's pytree helper builds torch's LeafSpec, which this torch deprecates; the
# warning comes from inside every fit(), whatever the data.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning")


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


# The resumed run writes its checkpoints to a folder of its own, which Lightning remarks on.
@pytest.mark.filterwarnings("ignore:The dirpath has changed from:UserWarning")
def test_a_resumed_fit_trains_on_exactly_the_batches_of_an_uninterrupted_run(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 300)
    whole: list[list[list[int]]] = []
    fit(kafka, topic, tmp_path / "whole", whole)
    assert_distinct_batches(whole, STEPS)

    first: list[list[list[int]]] = []
    with pytest.raises(Crash):
        fit(kafka, topic, tmp_path / "cut", first, crash_at=8)
    assert len(first) == 8
    saved = tmp_path / "cut" / "epoch=0-step=8.ckpt"
    loader_state = torch.load(saved, weights_only=False)["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert [state["version"] for state in loader_state] == [1]

    rest: list[list[list[int]]] = []
    fit(kafka, topic, tmp_path / "resumed", rest, ckpt_path=saved)
    assert first + rest == whole


def test_a_topic_of_samples_stops_fit_with_a_schema_error(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    assert_samples_topic_refused(kafka, make_topic, lambda topic: fit(kafka, topic, tmp_path, []))


def test_without_lightning_the_import_names_the_extra() -> None:
    assert_import_names_the_extra("kafeed.integrations.lightning", "pytorch_lightning", "lightning")
