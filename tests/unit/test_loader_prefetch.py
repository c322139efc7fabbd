"""Prefetch: items made on a thread, bounded, errors raised as they were, stopped on close."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafeed.loader.workers.prefetch import PARK_AFTER, THREAD_AFTER, Prefetch, Stopped


def _until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


class Source:
    """A counted source: ``made`` items so far, which thread made them, whether it was closed."""

    def __init__(self, count: int | None = None, fail_at: int | None = None,
                 error: BaseException | None = None) -> None:
        self.count = count
        self.fail_at = fail_at
        self.error = error
        self.made = 0
        self.threads: set[str] = set()
        self.closed_on: str | None = None

    def __call__(self, stop: threading.Event) -> Iterator[int]:
        try:
            i = 0
            while self.count is None or i < self.count:
                self.threads.add(threading.current_thread().name)
                if i == self.fail_at and self.error is not None:
                    raise self.error
                self.made += 1
                yield i
                i += 1
        finally:
            self.closed_on = threading.current_thread().name


def test_items_come_in_order_and_the_source_is_closed_on_its_thread() -> None:
    source = Source(count=40)
    prefetch = Prefetch(source, 2, name="test-prefetch")
    assert list(prefetch) == list(range(40))
    assert source.threads == {"test-prefetch"}
    assert prefetch.close(timeout=10)
    assert source.closed_on == "test-prefetch"


def test_the_thread_stays_at_most_depth_items_ahead() -> None:
    source = Source()  # endless
    prefetch = Prefetch(source, 2)
    try:
        _until(lambda: prefetch.waiting == 2)
        # The thread has made one more and waits to hand it over; given time, it makes no more.
        _until(lambda: source.made == 3)
        threading.Event().wait(0.3)
        assert (source.made, prefetch.waiting) == (3, 2)
        assert next(prefetch) == 0
        _until(lambda: source.made == 4)
        threading.Event().wait(0.3)
        assert (source.made, prefetch.waiting) == (4, 2)
    finally:
        assert prefetch.close(timeout=10)
    assert source.closed_on is not None


@pytest.mark.parametrize("hold", [False, True])
def test_an_item_taken_keeps_its_place_until_released(hold: bool) -> None:
    source = Source()
    prefetch = Prefetch(source, 1, hold=hold)
    try:
        # Iterated with hold (as StreamLoader does), next() keeps the place as take() does.
        assert (next(prefetch) if hold else prefetch.take()) == 0
        _until(lambda: source.made == 2)  # item 1 is made and waits for a place
        threading.Event().wait(0.3)
        assert prefetch.waiting == 0
        prefetch.release()
        _until(lambda: prefetch.waiting == 1)
        assert next(prefetch) == 1
    finally:
        assert prefetch.close(timeout=10)


class BuildError(ValueError):
    pass


def test_an_error_is_raised_in_the_callers_thread_after_the_items_before_it() -> None:
    error = BuildError("record 3 is bad")
    source = Source(count=10, fail_at=3, error=error)
    prefetch = Prefetch(source, 2)
    got = [next(prefetch), next(prefetch), next(prefetch)]
    with pytest.raises(BuildError) as raised:
        next(prefetch)
    assert got == [0, 1, 2]
    assert raised.value is error and type(raised.value) is BuildError
    with pytest.raises(StopIteration):  # raised once; the iteration is over
        next(prefetch)
    assert prefetch.close(timeout=10)


def test_close_ends_a_thread_blocked_in_a_wait_that_watches_the_stop() -> None:
    closed = threading.Event()
    started = threading.Event()

    def waiting(stop: threading.Event) -> Iterator[int]:
        try:
            started.set()
            while not stop.wait(0.05):  # as the reader waits on a live topic with no new data
                pass
            raise Stopped("stopped")
            yield 0  # a generator
        finally:
            closed.set()

    prefetch = Prefetch(waiting, 2)
    started.wait(10)
    t0 = time.monotonic()
    assert prefetch.close(timeout=10)
    assert time.monotonic() - t0 < 2
    assert closed.is_set()
    with pytest.raises(StopIteration):  # Stopped is the thread's end, not the caller's error
        next(prefetch)


def test_close_ends_a_thread_waiting_for_room() -> None:
    source = Source()
    prefetch = Prefetch(source, 1)
    _until(lambda: source.made == 2)  # one waiting, one being handed over
    assert prefetch.close(timeout=10)
    assert source.closed_on is not None
    assert prefetch.stopped


def test_a_dropped_prefetch_stops_its_thread() -> None:
    source = Source()
    prefetch = Prefetch(source, 2, name="test-dropped-prefetch")
    _until(lambda: source.made == 3)
    del prefetch
    gc.collect()
    _until(lambda: not any(t.name == "test-dropped-prefetch" for t in threading.enumerate()), 5)
    assert source.closed_on == "test-dropped-prefetch"


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Prefetch(Source(count=1), 0)


# -- a caller that comes straight back makes the items itself ------------------------------
def test_a_caller_that_comes_straight_back_makes_the_items_itself_in_the_same_order() -> None:
    source = Source(count=60)
    prefetch = Prefetch(source, 2, name="test-inline", inline_below_s=10.0)  # any caller is quick
    got = [next(prefetch) for _ in range(PARK_AFTER + 4)]
    assert prefetch.inline
    assert threading.current_thread().name in source.threads  # made here, after the hand-back
    got += list(prefetch)
    assert got == list(range(60))
    assert source.closed_on == threading.current_thread().name
    assert not any(t.name == "test-inline" and t.is_alive() for t in threading.enumerate())
    assert prefetch.close(timeout=10)


def test_a_caller_away_long_enough_gets_a_thread_again_and_nothing_is_lost_or_repeated() -> None:
    source = Source(count=80)
    prefetch = Prefetch(source, 2, name="test-rethread", inline_below_s=0.2)
    got = [next(prefetch) for _ in range(PARK_AFTER + 6)]
    assert prefetch.inline
    for _ in range(THREAD_AFTER + 1):  # a slow step, as a trainer's
        threading.Event().wait(0.3)
        got.append(next(prefetch))
    assert not prefetch.inline
    _until(lambda: prefetch.waiting == 2)  # the new thread builds ahead again
    before = set(source.threads)
    got += list(prefetch)
    assert got == list(range(80))
    assert "test-rethread" in before
    assert prefetch.close(timeout=10)
    assert source.closed_on is not None  # on whichever side was making items at the end


def test_an_error_made_on_the_callers_thread_is_raised_as_it_was() -> None:
    error = BuildError("record 20 is bad")
    source = Source(count=40, fail_at=20, error=error)
    prefetch = Prefetch(source, 2, inline_below_s=10.0)
    got = [next(prefetch) for _ in range(20)]
    assert prefetch.inline and got == list(range(20))
    with pytest.raises(BuildError) as raised:
        next(prefetch)
    assert raised.value is error
    with pytest.raises(StopIteration):
        next(prefetch)
    assert source.closed_on is not None and prefetch.close(timeout=10)


def test_close_from_another_thread_ends_a_caller_waiting_inside_the_source() -> None:
    closed = threading.Event()
    waiting_now = threading.Event()

    def live(stop: threading.Event) -> Iterator[int]:
        try:
            yield from range(PARK_AFTER + 2)
            waiting_now.set()
            while not stop.wait(0.05):  # a live topic with no new data
                pass
            raise Stopped("stopped")
        finally:
            closed.set()

    prefetch = Prefetch(live, 2, inline_below_s=10.0)
    got: list[Any] = []
    caller = threading.Thread(target=lambda: got.extend(prefetch))
    caller.start()
    assert waiting_now.wait(10)
    assert prefetch.inline  # the wait is on the caller's thread
    assert prefetch.close(timeout=10)
    caller.join(10)
    assert not caller.is_alive() and closed.is_set()
    assert got == list(range(PARK_AFTER + 2))


def test_a_dropped_prefetch_closes_the_source_its_caller_ran() -> None:
    source = Source()
    prefetch = Prefetch(source, 2, inline_below_s=10.0)
    for _ in range(PARK_AFTER + 3):
        next(prefetch)
    assert prefetch.inline and source.closed_on is None
    del prefetch
    gc.collect()
    assert source.closed_on is not None


class _Signal(BaseException):
    """As a trainer's stop raises out of a wait (kafeed.train.stops)."""


def test_a_signal_raised_while_the_thread_starts_still_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    source = Source()  # endless: only the stop ends it
    start = threading.Thread.start

    def start_then_signal(thread: threading.Thread) -> None:
        start(thread)
        raise _Signal  # handled inside start()'s wait for the thread, as SIGTERM can be

    monkeypatch.setattr(threading.Thread, "start", start_then_signal)
    with pytest.raises(_Signal):
        Prefetch(source, 2, name="test-started-then-signal")
    monkeypatch.undo()
    gc.collect()
    _until(lambda: not any(t.name == "test-started-then-signal" for t in threading.enumerate()), 5)
    assert source.closed_on == "test-started-then-signal"
