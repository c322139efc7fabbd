"""A Hugging Face ``Trainer`` fed by a kafeed token loader, resumed exactly from its checkpoints.

:class:`KafeedTrainer` is a ``transformers.Trainer`` that iterates a :class:`kafeed.StreamLoader`
instead of building a DataLoader. Each time the Trainer writes ``checkpoint-N``, every rank's
loader state as of the last batch it trained on is gathered
(:func:`kafeed.loader.state.rank_states.gather_states`) and written beside it by rank 0, last, as
``kafeed_loader.json`` (atomically, as kafeed's own checkpoints are).
``train(resume_from_checkpoint=...)`` loads it back before training, at the same world size or
another, and the Trainer's own fast-forward, which would skip batches a second time, is switched
off (``ignore_data_skip``). ``resume_from_checkpoint=True`` takes the newest ``checkpoint-N``
whose loader states were all written, so a save cut short falls back to the one before. See
docs/integrations.md.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.extras import missing_extra
from kafeed.loader.state.rank_states import distributed_world, gather_states, rank_states
from kafeed.train.checkpoint import CheckpointError, write_atomic
from kafeed.train.distributed import check_restarts
from kafeed.train.lineage import HF_STATE_FILE

try:
    # Looked for first, transformers before anything heavy: a missing one is named at once
    # (accelerate: the Trainer needs it, but says so only when it is built).
    importlib.import_module("transformers")
    importlib.import_module("accelerate")
    import torch
    from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ModuleNotFoundError as exc:
    raise (missing_extra(exc) or exc) from None

if TYPE_CHECKING:
    from kafeed.loader.stream_loader import StreamLoader

log = logging.getLogger("kafeed")

STATE_FILE = HF_STATE_FILE
STATE_VERSION = 1
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")  # the Trainer's checkpoint folders
_TRAINER_STATE = "trainer_state.json"

Inputs = Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]


def causal_lm_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A kafeed token batch as a causal language model's inputs: the whole window
    (``seq_len + 1`` tokens) as ``input_ids`` and as ``labels``, since Hugging Face models
    shift the labels themselves. Every token is predicted once; the model needs
    ``seq_len + 1`` positions."""
    window = batch["tokens"]
    return {"input_ids": window, "labels": window}


class _Batches:
    """What the Trainer iterates in place of its DataLoader: the loader's batches as inputs."""

    def __init__(self, loader: StreamLoader, inputs: Inputs) -> None:
        self.loader = loader
        self.inputs = inputs

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for batch in self.loader:
            yield self.inputs(batch)


def output_dir(args: TrainingArguments) -> Path:
    """Where the Trainer writes its ``checkpoint-N`` folders."""
    return Path(args.output_dir or "trainer_output")  # the Trainer's own default


def save_loader_state(folder: Path, step: int, state: dict[str, Any]) -> Path:
    """Write ``state`` (every rank's, taken at global step ``step``) into the checkpoint ``folder``."""
    path = folder / STATE_FILE
    doc = {"version": STATE_VERSION, "step": step, "loader": state}
    write_atomic(path, json.dumps(doc, separators=(",", ":")).encode())
    return path


def read_loader_state(folder: Path) -> dict[str, Any]:
    """The ranks' loader states saved in the checkpoint ``folder``, checked to be all there and
    against the Trainer's step there; raises :class:`CheckpointError` or
    :class:`kafeed.ResumeMismatch`."""
    path = folder / STATE_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"Checkpoint {folder} holds no kafeed loader state ({STATE_FILE}): it was "
                              "written by another trainer, or its save was cut short.",
                              hint="Resume from an earlier checkpoint-N, or start without "
                                   "resume_from_checkpoint.") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"The kafeed loader state {path} is unreadable: {exc}.") from None
    if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION or "loader" not in doc:
        raise CheckpointError(f"The kafeed loader state {path} has an unknown layout.")
    try:
        rank_states(doc["loader"])
    except ResumeMismatch as exc:
        raise CheckpointError(f"{path}: {exc.message}", hint=exc.hint) from None
    trainer_state = folder / _TRAINER_STATE
    if trainer_state.exists():
        step = TrainerState.load_from_json(str(trainer_state)).global_step
        if doc.get("step") != step:
            raise ResumeMismatch(f"The kafeed loader state in {folder} was taken at step {doc.get('step')}, "
                                 f"but the Trainer's state there is at step {step}.",
                                 hint="Resume from a checkpoint folder as the Trainer wrote it.")
    state: dict[str, Any] = doc["loader"]
    return state


def last_checkpoint(output_dir: str | os.PathLike[str]) -> Path | None:
    """The newest ``checkpoint-N`` in ``output_dir`` that holds a readable loader state, None
    when there is none; newer ones without one (a save cut short) are skipped with a warning.
    ``trainer.train(resume_from_checkpoint=last_checkpoint(dir))`` starts afresh or resumes."""
    root = Path(output_dir)
    found = sorted(((int(m.group(1)), p) for p in (root.iterdir() if root.is_dir() else ())
                    if (m := _CHECKPOINT.match(p.name)) and p.is_dir()), reverse=True)
    for _step, folder in found:
        try:
            read_loader_state(folder)
        except CheckpointError as exc:
            log.warning("skipping %s: %s", folder.name, exc.message)
            continue
        return folder
    return None


class LoaderStateCallback(TrainerCallback):
    """Writes every rank's loader state into each checkpoint folder, after the Trainer's own
    files. The Trainer calls ``on_save`` on every rank, so every rank joins the gather."""

    def __init__(self, loader: StreamLoader) -> None:
        self.loader = loader

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> TrainerControl:
        states = gather_states(self.loader.state_dict())
        if distributed_world()[0] == 0:
            folder = output_dir(args) / f"checkpoint-{state.global_step}"
            save_loader_state(folder, state.global_step, states)
        return control


class KafeedTrainer(Trainer):
    """A ``transformers.Trainer`` that trains on ``train_loader``, a token :class:`kafeed.StreamLoader`.

    ``KafeedTrainer(model=..., args=TrainingArguments(..., max_steps=N, save_steps=K),
    train_loader=loader)``; every other keyword is the Trainer's. ``inputs`` turns a kafeed
    batch into the model's keyword arguments (default :func:`causal_lm_inputs`). The loader
    states of every rank ride in each checkpoint folder; ``train(resume_from_checkpoint=True |
    path)`` continues with exactly the batches an uninterrupted run of the same world size would
    have trained on, and at another world size trains every record once. Sets
    ``args.ignore_data_skip``: the loader resumes itself, a fast-forward would skip twice.
    Under torchrun or ``accelerate launch``, refuses to start when the Trainer does not see
    the process group that torch.distributed runs (each rank would train its own model).
    Combine with another Trainer subclass as ``class T(KafeedTrainer, SFTTrainer)``.
    """

    def __init__(self, *args: Any, train_loader: StreamLoader, inputs: Inputs = causal_lm_inputs,
                 **kwargs: Any) -> None:
        from kafeed.loader.stream_loader import StreamLoader

        if not isinstance(train_loader, StreamLoader):
            raise ConfigError(f"KafeedTrainer needs a kafeed.StreamLoader as train_loader, not "
                              f"{type(train_loader).__name__}.")
        if train_loader.dataset.settings.kind != "tokens":
            raise ConfigError("KafeedTrainer trains a language model on token windows, but this loader "
                              "reads TrainingSample records.",
                              hint="Read a TokenizedDocument topic (what kafeed prepare writes) with "
                                   "kafeed.KafkaTokenDataset.")
        if kwargs.get("train_dataset") is not None:
            raise ConfigError("KafeedTrainer trains on train_loader; it takes no train_dataset.")
        super().__init__(*args, **kwargs)
        if self.args.max_steps <= 0:
            raise ConfigError("A Kafka topic has no length, so KafeedTrainer needs "
                              "TrainingArguments(max_steps=N).")
        _rank, world = distributed_world()
        check_restarts()
        if world != self.args.world_size:
            # transformers on a machine without a GPU reports one process unless use_cpu=True,
            # while torchrun's process group joins them all: no gradient would be shared.
            raise ConfigError(f"torch.distributed runs {world} processes, but the Trainer sees "
                              f"{self.args.world_size}: each rank would train a model of its own.",
                              hint="On a machine without a GPU, pass TrainingArguments(use_cpu=True).")
        self.args.ignore_data_skip = True
        self.train_loader = train_loader
        self._batches = _Batches(train_loader, inputs)
        self.add_callback(LoaderStateCallback(train_loader))

    def get_train_dataloader(self) -> Any:
        # The loader is handed over as it is: accelerate's prepare() would re-batch it, and
        # its look-ahead would put a batch not yet trained on into the saved state.
        return self._batches

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        device = self.args.device
        if device.type != "cpu" or device.index is None:
            super()._load_optimizer_and_scheduler(checkpoint)
            return
        # Under several processes the Trainer loads the optimizer onto args.device, which on CPU
        # is device("cpu", 0), and torch.load cannot map onto that ("don't know how to restore
        # data location ... cpu:0"): every resume of a CPU job of several ranks would fail.
        self.args.__dict__["_setup_devices"] = torch.device("cpu")
        try:
            super()._load_optimizer_and_scheduler(checkpoint)
        finally:
            self.args.__dict__["_setup_devices"] = device

    def train(self, resume_from_checkpoint: str | os.PathLike[str] | bool | None = None, *args: Any,
              **kwargs: Any) -> Any:
        """The Trainer's ``train``; a checkpoint to resume from (True: the newest with a loader
        state, see :func:`last_checkpoint`) also restores the loader."""
        folder: Path | None = None
        if resume_from_checkpoint is True:
            root = output_dir(self.args)
            folder = last_checkpoint(root)
            if folder is None:
                raise CheckpointError(f"No checkpoint in {root} holds a kafeed loader state.",
                                      hint="Train without resume_from_checkpoint to start afresh.")
        elif resume_from_checkpoint is not None and resume_from_checkpoint is not False:
            folder = Path(resume_from_checkpoint)
        if folder is not None:
            self.train_loader.load_state_dict(read_loader_state(folder))
            log.info("kafeed: resuming the loader from %s", folder)
        return super().train(None if folder is None else str(folder), *args, **kwargs)
