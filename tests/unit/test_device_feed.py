"""The GPU feed's logic on CPU: order, buffer reuse, one batch ahead, hand-off marks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

import kafeed
from kafeed.errors import ConfigError
from kafeed.loader.workers.device_feed import DeviceFeed, resolve_device


def _batches(n: int, marks: list[int], pulled: list[int]) -> Iterator[tuple[dict[str, Any], Any]]:
    for k in range(n):
        pulled.append(k)
        rows = 4 if k < n - 1 else 3  # a short last batch, as a bounded run ends
        tokens = torch.arange(rows * 9).reshape(rows, 9) + 1000 * k
        yield {"tokens": tokens, "doc_start": tokens % 5 == 0, "id": [f"b{k}"] * rows}, \
            (lambda k=k: marks.append(k))


def test_same_batches_in_order_reused_buffers_one_ahead() -> None:
    feed = DeviceFeed(torch.device("cpu"), pin=True, pool=3)
    marks: list[int] = []
    pulled: list[int] = []
    got = []
    for k, batch in enumerate(feed.ahead(_batches(20, marks, pulled))):
        assert marks == list(range(k + 1))  # marked just before it is handed out
        assert pulled[-1] == min(k + 1, 19)  # the next batch's copy is already started
        got.append(batch)
    # Nothing handed out is overwritten by later batches, though the buffers are reused.
    for k, batch in enumerate(got):
        rows = 4 if k < 19 else 3
        assert torch.equal(batch["tokens"], torch.arange(rows * 9).reshape(rows, 9) + 1000 * k)
        assert torch.equal(batch["doc_start"], batch["tokens"] % 5 == 0) and batch["id"][0] == f"b{k}"
    assert feed.allocations == 3 * 2 + 2  # 3 per full-batch tensor, 1 each for the short tail


def test_stopping_early_leaves_the_prefetched_batch_unmarked() -> None:
    feed = DeviceFeed(torch.device("cpu"), pin=False)
    marks: list[int] = []
    it = feed.ahead(_batches(10, marks, []))
    for _ in range(4):
        next(it)
    assert marks == [0, 1, 2, 3]  # batch 4 was staged, never handed out: the state excludes it


def test_cuda_without_cuda_is_one_sentence() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match="needs CUDA") as err:
        resolve_device("cuda")
    assert err.value.message.count(". ") == 0
    dataset = kafeed.KafkaTokenDataset("t", seq_len=4, eos_id=0)
    with pytest.raises(ConfigError, match="needs CUDA"):
        kafeed.StreamLoader(dataset, batch_size=2, pin_memory=True, device="cuda")
    with pytest.raises(ConfigError, match="not a torch device"):
        resolve_device("gpu0")
