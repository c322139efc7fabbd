"""The PyTorch loader: Kafka partitions or local files -> packed token windows or samples, exactly once.

Pure-logic pieces (assignment, packing, shuffle, state) import without torch; the torch
classes (datasets, StreamLoader) load on first use, so ``import kafeed.loader`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafeed.loader.nodes.packing import TokenPacker
from kafeed.loader.nodes.shuffle import ShuffleBuffer
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import assign, partition_key
from kafeed.loader.state.checkpoint import fingerprint, merge_states

if TYPE_CHECKING:
    from kafeed.loader.dataset import KafkaSampleDataset, KafkaTokenDataset, collate_samples
    from kafeed.loader.file_dataset import FileTokenDataset
    from kafeed.loader.mixture import Mixture
    from kafeed.loader.stream_loader import StreamLoader

_LAZY = {
    "FileTokenDataset": "kafeed.loader.file_dataset",
    "KafkaSampleDataset": "kafeed.loader.dataset",
    "KafkaTokenDataset": "kafeed.loader.dataset",
    "collate_samples": "kafeed.loader.dataset",
    "Mixture": "kafeed.loader.mixture",
    "StreamLoader": "kafeed.loader.stream_loader",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafeed.loader' has no attribute {name!r}")
    try:
        import importlib

        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            raise ImportError(f"{name} needs PyTorch: pip install 'kafeed[torch]'") from exc
        raise


__all__ = [
    "FileTokenDataset",
    "KafkaSampleDataset",
    "KafkaTokenDataset",
    "LoaderSettings",
    "Mixture",
    "ShuffleBuffer",
    "StreamLoader",
    "TokenPacker",
    "assign",
    "collate_samples",
    "fingerprint",
    "merge_states",
    "partition_key",
]
