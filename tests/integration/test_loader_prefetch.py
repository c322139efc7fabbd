"""The in-process loader's prefetch thread: exact state, prompt stop, no thread left behind."""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.loader.workers.prefetch import PARK_AFTER, THREAD_AFTER
from tests.integration.loader_data import EOS, counts, produce_docs
from tests.kafka_fixtures import TopicFactory

PREFETCH = "kafeed-prefetch"


def _until(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == PREFETCH]


def _loader(kafka: ConnectionSettings, topic: str, **kw: Any) -> kafeed.StreamLoader:
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=EOS, connection=kafka, shuffle_buffer=25,
                                  seed=5, **kw)
    return kafeed.StreamLoader(ds, batch_size=4)


def _tokens(batch: dict[str, Any]) -> list[list[int]]:
    return np.asarray(batch["tokens"]).tolist()  # type: ignore[no-any-return]


@pytest.mark.parametrize("depth", [1, 2])
def test_checkpoint_with_batches_prefetched_resumes_with_the_same_batches(
    kafka: ConnectionSettings, make_topic: TopicFactory, depth: int
) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 400, seed=11)
    plain = [_tokens(b) for b in _loader(kafka, topic, prefetch_batches=0)]

    loader = _loader(kafka, topic, prefetch_batches=depth)
    it = iter(loader)
    first = [_tokens(next(it)) for _ in range(7)]
    # The thread has built `depth` batches beyond the 7 handed out; the state must not count them.
    _until(lambda: loader.prefetched == depth)
    state = json.loads(json.dumps(loader.state_dict()))
    rest = [_tokens(b) for b in it]
    assert first + rest == plain  # prefetching changes nothing in what is handed out

    resumed = _loader(kafka, topic, prefetch_batches=depth)
    resumed.load_state_dict(state)
    again = [_tokens(b) for b in resumed]
    assert again == rest
    assert np.array_equal(counts([np.array(b) for b in first + again], len(expected)), expected)
    _until(lambda: not _prefetch_threads(), 10)


def test_a_loop_that_only_reads_builds_its_own_batches_and_the_state_stays_exact(
    kafka: ConnectionSettings, make_topic: TopicFactory
) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 800, seed=12)
    plain = [_tokens(b) for b in _loader(kafka, topic, prefetch_batches=0)]
    assert len(plain) > 150

    loader = _loader(kafka, topic, prefetch_batches=2)
    it = iter(loader)
    got = [_tokens(next(it)) for _ in range(PARK_AFTER)]
    while _prefetch_threads() and len(got) < 80:  # straight back for each one (a busy machine
        got.append(_tokens(next(it)))  # may hold one back longer: the count starts again)
    _until(lambda: not _prefetch_threads())  # the thread handed the iterator over and ended
    # The batches it made before that (depth at most) come first, then the caller makes its own.
    got += [_tokens(next(it)) for _ in range(3)]
    inline_state, inline_done = json.loads(json.dumps(loader.state_dict())), len(got)
    for _ in range(THREAD_AFTER + 1):  # then away for a step, as a trainer is
        time.sleep(0.02)
        got.append(_tokens(next(it)))
    _until(lambda: loader.prefetched == 2)  # a thread builds ahead again
    threaded_state = json.loads(json.dumps(loader.state_dict()))
    rest = [_tokens(b) for b in it]
    assert got + rest == plain

    for state, done in ((inline_state, inline_done), (threaded_state, len(got))):
        resumed = _loader(kafka, topic, prefetch_batches=2)
        resumed.load_state_dict(state)
        again = [_tokens(b) for b in resumed]
        assert again == plain[done:]
    assert np.array_equal(counts([np.array(b) for b in got + rest], len(expected)), expected)
    _until(lambda: not _prefetch_threads(), 10)


def test_close_stops_a_thread_waiting_on_an_empty_live_topic(kafka: ConnectionSettings,
                                                             make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    # A long consume timeout: the stop hook, not the timeout, must end the wait.
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=EOS, connection=kafka, end=None,
                                  poll_timeout_s=60)
    loader = kafeed.StreamLoader(ds, batch_size=4)
    before = set(_prefetch_threads())
    got: list[Any] = []
    trainer = threading.Thread(target=lambda: got.append(next(iter(loader), "ended")))
    trainer.start()
    _until(lambda: bool(ds.stats()))  # the reader is open and waiting for records
    started = set(_prefetch_threads()) - before
    assert len(started) == 1
    t0 = time.monotonic()
    loader.close()
    took = time.monotonic() - t0
    assert took < 3, f"close took {took:.1f} s"
    trainer.join(10)
    assert not trainer.is_alive() and got == ["ended"]  # the waiting trainer is let go
    assert not any(t.is_alive() for t in started)


def test_breaking_off_or_dropping_the_loader_ends_the_thread(kafka: ConnectionSettings,
                                                             make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 20, seed=2)  # about four batches, then a live wait
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=EOS, connection=kafka, end=None)
    loader = kafeed.StreamLoader(ds, batch_size=4)
    for _batch in loader:
        break  # the trainer stops early
    _until(lambda: not _prefetch_threads(), 3)
    state = loader.state_dict()

    it = iter(loader)  # continues after the batch handed out
    next(it)
    assert loader.state_dict() != state
    _until(lambda: bool(_prefetch_threads()))
    del it, loader, ds
    gc.collect()
    _until(lambda: not _prefetch_threads(), 3)
