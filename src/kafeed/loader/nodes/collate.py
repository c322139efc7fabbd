"""Batches as the datasets hand them out: token windows as tensors with their shifted views,
sample dicts collated into one batch."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

Collate = Callable[[list[dict[str, Any]]], Any]


def token_batch(tokens: torch.Tensor, doc_start: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """A token batch (or one window): ``tokens``, ``input_ids`` = tokens[..., :-1] and
    ``labels`` = tokens[..., 1:] (views, no copy), and ``doc_start`` when given."""
    out = {"tokens": tokens, "input_ids": tokens[..., :-1], "labels": tokens[..., 1:]}
    if doc_start is not None:
        out["doc_start"] = doc_start
    return out


def collate_samples(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Batch TrainingSample dicts: ``targets`` is a (B, T) float32 tensor (ragged rows padded
    with NaN); ``input`` (bytes), ``text`` (UTF-8, errors replaced), ``id``, ``metadata``,
    ``topic``, ``partition`` and ``offset`` are lists."""
    width = max((len(s["targets"]) for s in samples), default=0)
    targets = np.full((len(samples), width), np.nan, dtype=np.float32)
    for row, s in enumerate(samples):
        targets[row, : len(s["targets"])] = s["targets"]
    return {
        "targets": torch.from_numpy(targets),
        "input": [s["input"] for s in samples],
        "text": [bytes(s["input"]).decode("utf-8", errors="replace") for s in samples],
        "id": [s["id"] for s in samples],
        "metadata": [s["metadata"] for s in samples],
        "topic": [s["topic"] for s in samples],
        "partition": [s["partition"] for s in samples],
        "offset": [s["offset"] for s in samples],
    }
