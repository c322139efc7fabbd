"""Ranks that stop together: under torch.distributed with a bounded dataset, every rank
yields the same number of batches, so none waits forever in a collective."""

from __future__ import annotations

import torch


def should_sync(choice: bool | None, bounded: bool) -> bool:
    """Whether ranks agree each step: ``choice`` (StreamLoader's ``sync_ranks``), by default
    when the dataset is bounded; never without a process group of more than one rank."""
    dist = torch.distributed
    live = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    if choice is None:
        return bool(live and bounded)
    return bool(choice and live)


def agree(have: bool) -> bool:
    """True while every rank has a batch (an all_reduce MIN of the flag)."""
    dist = torch.distributed
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    flag = torch.tensor([1 if have else 0], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())
