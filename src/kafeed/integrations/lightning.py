"""A PyTorch Lightning ``LightningDataModule`` over a kafeed loader, resumed exactly from its checkpoints.

Lightning's fit loop saves the state of a training dataloader that has ``state_dict`` /
``load_state_dict`` inside its own checkpoint (``loops.fit_loop.state_dict.combined_loader``)
and loads it back on ``fit(ckpt_path=...)`` before iterating again. The loader it is given
here is :class:`TrainLoader`: Lightning fetches a batch ahead of the one it trains on (to
know which batch is the last), so the state it saves is the loader's as of the last batch
that reached the training step, marked by :meth:`KafeedDataModule.on_before_batch_transfer`,
not as of the last batch fetched. Under several devices (``strategy="ddp"``), Lightning asks
every rank for that state as it writes a checkpoint, so each rank's is gathered there
(:func:`kafeed.loader.state.rank_states.gather_states`) and rank 0's checkpoint holds them all; a
resume loads them at the same world size or another. See docs/integrations.md.
"""

from __future__ import annotations

import copy
import importlib
import logging
import os
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafeed.errors import ConfigError, KafeedError
from kafeed.extras import missing_extra
from kafeed.loader.state.rank_states import distributed_world, gather_states
from kafeed.train.distributed import check_restarts
from kafeed.train.lineage import checkpoint_lineage

try:
    importlib.import_module("pytorch_lightning")  # first: a missing one is named before torch loads
    import pytorch_lightning as pl
except ModuleNotFoundError as exc:
    raise (missing_extra(exc) or exc) from None

if TYPE_CHECKING:
    from kafeed.loader.stream_loader import StreamLoader


log = logging.getLogger("kafeed")

_STEP = re.compile(r"step=(\d+)")  # ModelCheckpoint's default file names: epoch=E-step=S.ckpt


def last_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The newest ``.ckpt`` in ``directory`` (by the step in its name, then its time) whose
    ranks' loader states are all there and readable, None when there is none; a newer one
    that is torn or incomplete is skipped with a warning. ``trainer.fit(...,
    ckpt_path=last_checkpoint(dir))`` starts afresh or resumes."""
    root = Path(directory)
    found = [p for p in (root.iterdir() if root.is_dir() else ()) if p.suffix == ".ckpt" and p.is_file()]

    def newest_first(path: Path) -> tuple[int, float]:
        match = _STEP.search(path.name)
        return (int(match.group(1)) if match else -1, path.stat().st_mtime)

    for path in sorted(found, key=newest_first, reverse=True):
        try:
            checkpoint_lineage(path)
        except KafeedError as exc:
            log.warning("skipping %s: %s", path.name, exc.message)
            continue
        return path
    return None


class TrainLoader:
    """The loader as Lightning's fit loop sees it: its batches, and a state that counts only
    the batches marked as trained on (:meth:`mark`), however many were fetched ahead."""

    def __init__(self, loader: StreamLoader) -> None:
        self.loader = loader
        self._ahead: deque[dict[str, Any]] = deque()  # states after each batch fetched, not yet marked
        self._state: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        if self._ahead and self._state is not None:
            # Batches fetched ahead and never trained on (fit ended at max_steps): read again.
            self.loader.load_state_dict(self._state)
        self._ahead.clear()
        self._state = self.loader.state_dict()
        for batch in self.loader:
            self._ahead.append(self.loader.state_dict())
            yield batch

    def mark(self) -> None:
        """The oldest batch fetched and not yet marked goes to the training step now."""
        if self._ahead:
            self._state = self._ahead.popleft()

    def state_dict(self) -> dict[str, Any]:
        """Every rank's loader state as of the last batch each marked (JSON data). A collective
        under several ranks: Lightning asks every rank for it as a checkpoint is written."""
        state = self.loader.state_dict() if self._state is None else copy.deepcopy(self._state)
        return gather_states(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume the loader from ``state`` (every rank's, or one) at the next iteration."""
        self.loader.load_state_dict(state)
        self._ahead.clear()
        self._state = None


class KafeedDataModule(pl.LightningDataModule):
    """A ``LightningDataModule`` whose training batches come from a :class:`kafeed.StreamLoader`.

    ``trainer.fit(module, datamodule=KafeedDataModule(loader))``, with ``Trainer(max_steps=N)``
    (a topic has no length). The loader's state rides in every Lightning checkpoint and
    ``trainer.fit(..., ckpt_path=path)`` continues with exactly the batches an uninterrupted
    run would have trained on. Batches are the loader's as they are (``tokens``,
    ``input_ids``, ``labels``, ...). Lightning calls this module's ``on_before_batch_transfer``
    in place of the LightningModule's (it says so in a warning): put a transformation of
    the batch in ``on_after_batch_transfer`` or the training step instead. Under
    ``strategy="ddp"`` each rank reads its own partitions and every checkpoint holds every
    rank's loader state.
    """

    def __init__(self, loader: StreamLoader) -> None:
        from kafeed.loader.stream_loader import StreamLoader

        if not isinstance(loader, StreamLoader):
            raise ConfigError(f"KafeedDataModule needs a kafeed.StreamLoader, not {type(loader).__name__}.")
        super().__init__()
        self.train_loader = TrainLoader(loader)

    def setup(self, stage: str) -> None:
        # Asked of torch.distributed itself: a rank outside the process group would save alone.
        _rank, world = distributed_world()
        check_restarts()
        if self.trainer is not None and self.trainer.world_size != world:
            raise ConfigError(f"Lightning runs {self.trainer.world_size} processes, but torch.distributed "
                              f"joins {world}: the ranks' loader states would not all reach the checkpoint.",
                              hint="Use a strategy that starts a process group (strategy=\"ddp\").")

    def train_dataloader(self) -> TrainLoader:
        return self.train_loader

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        # Called in fetch order, just before the step that trains on the batch; validation
        # batches (another loader) pass through unmarked.
        if self.trainer is not None and self.trainer.training:
            self.train_loader.mark()
        return batch
