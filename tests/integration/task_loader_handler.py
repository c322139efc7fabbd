"""A task handler that reads a topic with a StreamLoader and two DataLoader workers, for ever
(tests/integration/test_task_orphans.py kills its task worker meanwhile)."""

from __future__ import annotations

from typing import Any


def read_forever(params: dict[str, Any]) -> None:
    import kafeed

    ds = kafeed.KafkaTokenDataset(params["topic"], seq_len=15, eos_id=0, bootstrap=params["bootstrap"],
                                  end=None)
    for _ in kafeed.StreamLoader(ds, batch_size=2, num_workers=2):
        pass
