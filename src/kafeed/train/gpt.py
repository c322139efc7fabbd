"""`kafeed train --model gpt`: a small GPT from scratch on packed token windows."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.train.distributed import distributed_context
from kafeed.train.models import GPTConfig, TinyGPT, next_token_loss, parameter_count
from kafeed.train.optim import AdamW
from kafeed.train.options import TrainOptions
from kafeed.train.rng import seed_everything
from kafeed.train.runner import RunResult
from kafeed.train.startup import Startup, start
from kafeed.train.wiring import run_on_loader

log = logging.getLogger("kafeed")


def train_gpt(options: TrainOptions, connection: ConnectionSettings, *,
              progress: Callable[[str], None] = print,
              startup: Startup | None = None) -> tuple[RunResult, dict[str, Any]]:
    """Train :class:`TinyGPT` on ``options.topic``; returns the run result and a description.

    ``startup``: what :func:`kafeed.train.startup.start` prepared before torch was imported
    (the CLI does that); made here when not given."""
    from kafeed.loader import KafkaTokenDataset, Mixture, StreamLoader

    startup = startup or start(options, connection)
    tok = startup.tokenizer
    if tok is None:
        raise ConfigError("train_gpt needs a startup prepared for the gpt model.")
    rank, world = distributed_context()
    seed_everything(options.seed)
    ranks: dict[str, Any] = {"rank": rank if world > 1 else None, "world_size": world if world > 1 else None}
    dataset = (Mixture(options.mix, settings=startup.settings, **ranks) if options.mix
               else KafkaTokenDataset(settings=startup.settings, **ranks))
    startup.adopt_into(dataset)
    loader = StreamLoader(dataset, batch_size=options.batch_size, num_workers=options.num_workers)
    cfg = GPTConfig(vocab_size=tok.vocab_size, seq_len=options.seq_len, d_model=options.d_model,
                    n_layers=options.n_layers, n_heads=options.n_heads)
    core = TinyGPT(cfg)
    model: torch.nn.Module = core
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay,
                      warmup=options.warmup, total=options.steps)

    def step_fn(batch: dict[str, torch.Tensor]) -> tuple[float, int]:
        window = batch["tokens"]
        loss = next_token_loss(model, window)  # through DDP when wrapped, so gradients sync
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss.detach()), int(window.shape[0] * (window.shape[1] - 1))

    result, wiring = run_on_loader(
        model=core, optimizer=optimizer, loader=loader, step_fn=step_fn,
        connection=connection, options=options, rank=rank, world=world, progress=progress,
        config={"model": "gpt", "gpt": cfg.model_dump(), "tokenizer_fingerprint": tok.fingerprint},
    )
    describe = {"parameters": parameter_count(core), "vocab_size": tok.vocab_size,
                "tokenizer": tok.fingerprint, "loader_stats": wiring.stats()}
    return result, describe
