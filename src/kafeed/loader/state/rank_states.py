"""Every rank's loader state in one document: what a checkpoint holds under torch.distributed.

Each rank's ``StreamLoader.state_dict()`` holds only the readers that rank owns. Every path that
checkpoints a job (kafeed's own loop, ``kafeed train``, the Hugging Face Trainer, Lightning)
saves instead what :func:`gather_states` returns on every rank at the same step (a collective)::

    {"ranks_version": 1, "world_size": N, "ranks": [state of rank 0, ..., state of rank N-1]}

The document is complete or refused: it is built in memory from all N states and written once
(by rank 0, as the path's checkpoint writes), so a crash before the write leaves no document in
that checkpoint, and :func:`rank_states` refuses one whose ``ranks`` are not all there. A loader
loads it at any world size (the loader merges it, :func:`~kafeed.loader.state.checkpoint.merge_states`:
the same world size resumes batch for batch, another one reads every record once), and
``kafeed lineage`` names each rank's offset ranges from it. A plain (one rank's, or an earlier
merged) state is still accepted wherever a document is.

Whether the job has several ranks is asked of torch.distributed itself, never of a framework's
view of it: a job whose ``WORLD_SIZE`` says several processes but whose process group is not
initialized would save one rank's readers, and is refused.
"""

from __future__ import annotations

import os
from typing import Any

from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.loader.state.checkpoint import merge_states

__all__ = ["RANKS_VERSION", "distributed_world", "gather_states", "is_rank_states", "loadable_state",
           "rank_states"]

RANKS_VERSION = 1
_KEYS = ("ranks_version", "world_size", "ranks")


def distributed_world() -> tuple[int, int]:
    """(rank, world size) of torch.distributed's process group; (0, 1) without one. Raises
    :class:`ConfigError` when the launcher started several processes (``WORLD_SIZE``) but no
    process group joins them: each would save only its own readers."""
    launched = int(os.environ.get("WORLD_SIZE", "1") or 1)
    try:
        import torch.distributed as dist
    except ModuleNotFoundError:  # no torch: a plain process
        if launched > 1:
            raise ConfigError(f"WORLD_SIZE is {launched}, but PyTorch is not installed: no process "
                              "group joins the ranks.") from None
        return 0, 1
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if launched > 1:
        raise ConfigError(f"WORLD_SIZE is {launched}, but torch.distributed is not initialized in this "
                          "process: each rank's loader state would be saved alone.",
                          hint="Initialize the process group (torch.distributed.init_process_group) "
                               "before the first checkpoint, as the training framework does.")
    return 0, 1


def gather_states(state: dict[str, Any]) -> dict[str, Any]:
    """Every rank's loader ``state`` in one document (see the module docstring). Under a process
    group of several ranks this is a collective: every rank calls it at the same step, and every
    rank gets the whole document back. Alone, it wraps ``state`` as the one rank of one."""
    _rank, world = distributed_world()
    states: list[Any] = [state]
    if world > 1:
        import torch.distributed as dist

        states = [None] * world
        dist.all_gather_object(states, state)
    return {"ranks_version": RANKS_VERSION, "world_size": world, "ranks": states}


def is_rank_states(doc: Any) -> bool:
    """Whether ``doc`` is a document of every rank's state (not one loader state)."""
    return isinstance(doc, dict) and "ranks_version" in doc


def rank_states(doc: Any) -> list[dict[str, Any]]:
    """The states of a document's ranks, in rank order, checked to be all there; a single
    loader state is the one rank of one. Raises :class:`ResumeMismatch`."""
    if not is_rank_states(doc):
        return [doc]
    missing = [key for key in _KEYS if key not in doc]
    if missing:
        raise ResumeMismatch(f"The saved ranks' loader states lack {', '.join(missing)}.")
    if doc["ranks_version"] != RANKS_VERSION:
        raise ResumeMismatch(f"The saved ranks' loader states have version {doc['ranks_version']!r}; "
                             f"this kafeed reads version {RANKS_VERSION}.",
                             hint="Resume with the kafeed version that saved them, or start fresh.")
    world, ranks = doc["world_size"], doc["ranks"]
    if not isinstance(world, int) or isinstance(world, bool) or world < 1:
        raise ResumeMismatch(f"The saved ranks' loader states have world_size {world!r}.")
    if not isinstance(ranks, list) or len(ranks) != world or not all(isinstance(s, dict) for s in ranks):
        held = len(ranks) if isinstance(ranks, list) else 0
        raise ResumeMismatch(f"The saved loader states hold {held} of the job's {world} ranks: the "
                             "checkpoint is incomplete.",
                             hint="Resume from an earlier checkpoint.")
    return list(ranks)


def loadable_state(doc: Any) -> Any:
    """What a loader loads from ``doc``: the ranks' states merged into one, or the state as it is."""
    if not is_rank_states(doc):
        return doc
    ranks = rank_states(doc)
    return ranks[0] if len(ranks) == 1 else merge_states(ranks)
