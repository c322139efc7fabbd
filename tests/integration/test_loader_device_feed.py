"""The GPU feed path, run on CPU against the real broker: same batches, same state, exact resume."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import kafeed
from kafeed.config import ConnectionSettings
from tests.integration.loader_data import EOS, produce_docs
from tests.kafka_fixtures import TopicFactory
from tests.stateful_harness import Stateful, check_save_resume


def _loader(kafka: ConnectionSettings, topic: str, **kw: Any) -> kafeed.StreamLoader:
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=EOS, connection=kafka, shuffle_buffer=20, seed=5,
                                  return_boundaries=True)
    return kafeed.StreamLoader(ds, batch_size=4, **kw)


@pytest.mark.parametrize("workers", [0, 2])
def test_cpu_feed_matches_the_plain_path(kafka: ConnectionSettings, make_topic: TopicFactory,
                                         workers: int) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 300, seed=4)
    plain = _loader(kafka, topic, num_workers=workers)
    fed = _loader(kafka, topic, num_workers=workers, pin_memory=True, device="cpu")
    a, b = iter(plain), iter(fed)
    for _ in range(25):
        x, y = next(a), next(b)
        assert set(x) == set(y) and all(torch.equal(x[k], y[k]) for k in x)
        assert y["input_ids"].data_ptr() == y["tokens"].data_ptr()  # views, as on the plain path
        # Only what was handed out is in the state, though the feed has the next batch staged.
        assert plain.state_dict() == fed.state_dict()
    rest_plain, rest_fed = list(a), list(b)
    assert len(rest_plain) == len(rest_fed) > 0
    assert all(torch.equal(x["tokens"], y["tokens"]) for x, y in zip(rest_plain, rest_fed, strict=True))
    if workers == 0:
        step = lambda node: next(node[1], None)  # noqa: E731
        case = Stateful(make=lambda: (ld := _loader(kafka, topic, device="cpu"), iter(ld)),
                        step=step, state=lambda node: node[0].state_dict(),
                        load=lambda node, state: node[0].load_state_dict(state))
        check_save_resume(case, 7, 9)
