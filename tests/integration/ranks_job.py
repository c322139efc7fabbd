"""One training job of several ranks, as torchrun (or Lightning's DDP launcher) runs it, in one
of the paths that train on kafeed's loader: ``hf`` (KafeedTrainer), ``lightning``
(KafeedDataModule) or ``own`` (a plain loop, as in the README).

``python -m tests.integration.ranks_job JOB_JSON``, where the job says::

    {"path", "bootstrap", "topic", "out", "steps", "save_every", "resume",
     "drain": train until the bounded topic ends (HF: one epoch; Lightning: max_epochs=1),
     "devices": Lightning's device count, "use_cpu" and "fsdp": the Trainer's arguments,
     "crash": {"step", "rank", "how": "raise" | "kill"} on the first attempt only}

Each rank writes ``seen-r{rank}-a{attempt}.json``: the token windows of every batch it trained
on, in order, so that a test can compare runs batch for batch and count every document's tokens.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch

import kafeed

SEQ_LEN = 15
BATCH = 4


class Crash(Exception):
    """Cuts the first attempt short, as a failing rank would."""


def attempt() -> int:
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def crash_now(job: dict[str, Any], step: int, rank: int) -> None:
    crash = job.get("crash")
    if crash is None or attempt() > 0 or step != crash["step"] or crash["rank"] not in (rank, "all"):
        return
    if crash["how"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise Crash


def loader(job: dict[str, Any]) -> kafeed.StreamLoader:
    dataset = kafeed.KafkaTokenDataset(job["topic"], seq_len=SEQ_LEN, eos_id=0,
                                       connection=kafeed.ConnectionSettings(bootstrap=job["bootstrap"]),
                                       shuffle_buffer=16, seed=3)
    return kafeed.StreamLoader(dataset, batch_size=BATCH)


class Seen:
    """The windows this rank trained on, written out after each one (a kill loses none)."""

    def __init__(self, out: Path, rank: int) -> None:
        self.path = out / f"seen-r{rank}-a{attempt()}.json"
        self.batches: list[list[list[int]]] = []

    def add(self, tokens: torch.Tensor) -> None:
        self.batches.append(tokens.tolist())
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.batches))
        tmp.replace(self.path)


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(2048, 8), torch.nn.Linear(8, 2048))


def loss_of(net: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = net(batch["input_ids"])
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())


def run_hf(job: dict[str, Any], out: Path) -> None:
    from transformers import TrainerCallback, TrainingArguments

    from kafeed.integrations.hf import KafeedTrainer

    class LM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = model()

        def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"loss": loss_of(self.net, {"input_ids": input_ids[:, :-1], "labels": labels[:, 1:]})}

    args = TrainingArguments(output_dir=str(out / "ckpt"), max_steps=job["steps"],
                             save_steps=job["save_every"], per_device_train_batch_size=BATCH,
                             learning_rate=1e-3, logging_strategy="no",
                             report_to="none", use_cpu=job.get("use_cpu", True), disable_tqdm=True, seed=0,
                             fsdp=job.get("fsdp", ""),
                             save_total_limit=job.get("keep"))
    lm = LM()
    seen = Seen(out, args.process_index)
    lm.register_forward_pre_hook(lambda _m, a, kw: seen.add(kw["input_ids"]), with_kwargs=True)

    class Hooks(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            crash_now(job, state.global_step, args.process_index)

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if job.get("drain"):
                control.should_training_stop = True
                control.should_save = True

    trainer = KafeedTrainer(model=lm, args=args, train_loader=loader(job), callbacks=[Hooks()])
    trainer.train(resume_from_checkpoint=True if job["resume"] or attempt() > 0 else None)


def run_lightning(job: dict[str, Any], out: Path) -> None:
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint

    from kafeed.integrations.lightning import KafeedDataModule, last_checkpoint

    class LM(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model()
            self.seen: Seen | None = None

        def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            if self.seen is None:
                self.seen = Seen(out, self.global_rank)
            crash_now(job, self.global_step, self.global_rank)
            self.seen.add(batch["tokens"])
            return loss_of(self.net, batch)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    checkpoints = ModelCheckpoint(dirpath=out / "ckpt", every_n_train_steps=job["save_every"], save_top_k=-1)
    devices = job.get("devices", 1)
    trainer = pl.Trainer(max_steps=-1 if job.get("drain") else job["steps"],
                         max_epochs=1 if job.get("drain") else None, accelerator="cpu",
                         devices=devices, strategy="ddp" if devices > 1 else "auto",
                         logger=False, callbacks=[checkpoints], enable_progress_bar=False,
                         enable_model_summary=False)
    resume = last_checkpoint(out / "ckpt") if job["resume"] else None
    trainer.fit(LM(), datamodule=KafeedDataModule(loader(job)), ckpt_path=resume)


def run_own(job: dict[str, Any], out: Path) -> None:
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("gloo")
    rank = dist.get_rank() if dist.is_initialized() else 0
    base = model()  # saved unwrapped, so that a job of another world size (or none) loads it
    net = torch.nn.parallel.DistributedDataParallel(base) if dist.is_initialized() else base
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    feed = loader(job)
    path = out / "ckpt" / "ckpt.pt"
    step = 0
    if (job["resume"] or attempt() > 0) and path.exists():
        ckpt = torch.load(path, weights_only=False)
        base.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        feed.load_state_dict(ckpt["loader"])
        step = ckpt["step"]
    seen = Seen(out, rank)

    def save() -> None:
        states = kafeed.gather_states(feed.state_dict())  # every rank calls it
        if rank == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"model": base.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                        "loader": states}, path.with_suffix(".tmp"))
            path.with_suffix(".tmp").replace(path)

    for batch in feed:
        crash_now(job, step, rank)
        seen.add(batch["tokens"])
        loss = loss_of(net, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % job["save_every"] == 0 or step == job["steps"]:
            save()
        if step == job["steps"] and not job.get("drain"):
            break
    else:  # the bounded topic ended (every rank together): what the last batches left is saved
        if step % job["save_every"]:
            save()
    if dist.is_initialized():
        dist.destroy_process_group()


def main() -> None:
    job = json.loads(sys.argv[1])
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    {"hf": run_hf, "lightning": run_lightning, "own": run_own}[job["path"]](job, out)


if __name__ == "__main__":
    main()
