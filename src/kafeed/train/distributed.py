"""This process's place in a distributed run (torchrun), or a run of one."""

from __future__ import annotations

import logging
import os

import torch

log = logging.getLogger("kafeed")

# torch's elastic agent shares its rendezvous store with the workers by default; a worker group
# restarted by `torchrun --max-restarts` then reads the previous attempt's gloo addresses and
# hangs in init_process_group ("Gloo connectFullMesh failed ... Connection refused").
RESTART_STORE_FIX = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"


def check_restarts() -> None:
    """Warn (rank 0) when torchrun may restart this job with a store a restart cannot use."""
    restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0)
    shared = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    if restarts > 0 and shared and os.environ.get("RANK", "0") == "0":
        log.warning("torchrun --max-restarts %d with the agent's shared store: a restarted worker group "
                    "hangs in init_process_group on this PyTorch. Launch with %s torchrun ... so that "
                    "a restart resumes from the last checkpoint.", restarts, RESTART_STORE_FIX)


def distributed_context() -> tuple[int, int]:
    """Initialise torch.distributed under torchrun (gloo on CPU, NCCL on GPU); (rank, world)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    check_restarts()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), dist.get_world_size()
