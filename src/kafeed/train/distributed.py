"""This process's place in a distributed run (torchrun), or a run of one."""

from __future__ import annotations

import os

import torch


def distributed_context() -> tuple[int, int]:
    """Initialise torch.distributed under torchrun (gloo on CPU, NCCL on GPU); (rank, world)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), dist.get_world_size()
