"""The read-ahead policy: a depth in bytes from the consumption rate, inside the bound."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from kafeed.loader.sources.read_ahead import (
    MIB,
    MIN_READ_AHEAD,
    Budget,
    ReadAhead,
    decay,
    depth,
    next_rate,
    pausing,
    pull_count,
    pull_size,
    refill_after_wake,
    short,
    waking,
    woken_with,
)


@pytest.mark.parametrize("total", [MIN_READ_AHEAD, 64 * MIB, 3 * 1024 * MIB + 17])
def test_budget_splits_the_bound_between_librdkafka_and_the_queues(total: int) -> None:
    budget = Budget(total)
    assert budget.client + budget.ceiling == total
    assert 0 < budget.floor < budget.ceiling
    config = budget.client_config()
    assert config["queued.max.messages.kbytes"] * 1024 <= budget.client
    # librdkafka refuses fetch.max.bytes below message.max.bytes (1 MiB by default).
    assert MIB <= config["fetch.max.bytes"] <= budget.client
    assert config["max.partition.fetch.bytes"] <= config["fetch.max.bytes"]


def test_depth_is_lead_time_of_the_rate_within_floor_and_ceiling() -> None:
    budget = Budget(64 * MIB)
    assert depth(0.0, budget) == budget.floor
    assert depth(1000.0, budget) == budget.floor  # a slow consumer: the floor
    assert depth(10 * MIB, budget, lead_s=2.0) == 20 * MIB
    assert depth(1e12, budget) == budget.ceiling  # a fast one: everything allowed
    assert depth(math.nan, budget) == budget.floor
    assert depth(math.inf, budget) == budget.ceiling


def test_rate_is_a_time_weighted_average() -> None:
    assert next_rate(5.0, 100, 0.0) == 5.0  # no time passed: nothing learned
    # One half-life moves the estimate halfway to what was seen.
    assert next_rate(0.0, 1000, 1.0, half_life=1.0) == pytest.approx(500.0)
    rate = 0.0
    for _ in range(40):
        rate = next_rate(rate, 2_000_000, 0.5)
    assert rate == pytest.approx(4_000_000, rel=1e-3)
    # Many short calls count as one long one of the same total.
    short = 0.0
    for _ in range(100):
        short = next_rate(short, 10_000, 0.01)
    assert short == pytest.approx(next_rate(0.0, 1_000_000, 1.0), rel=0.02)


def _consume(ahead: ReadAhead, bytes_per_s: float, seconds: float, step: float = 0.05,
             start: float = 0.0) -> float:
    now = start
    ahead.tick(now)
    while now < start + seconds:
        now += step
        ahead.added(int(bytes_per_s * step))
        ahead.taken(int(bytes_per_s * step))
        ahead.tick(now)
    return now


def test_target_starts_at_the_ceiling_and_follows_the_consumer() -> None:
    budget = Budget(64 * MIB)
    fast = ReadAhead(budget.total)
    assert fast.target == budget.ceiling  # nothing measured yet: it may be fast
    now = _consume(fast, 200 * MIB, 10)
    assert fast.target == budget.ceiling
    slow = ReadAhead(budget.total)
    _consume(slow, 100_000, 20)
    assert slow.target == budget.floor  # the boost halved away, the rate is tiny
    # The fast consumer slows down: within seconds its read-ahead shrinks to the floor.
    _consume(fast, 100_000, 20, start=now)
    assert fast.target == budget.floor
    middling = ReadAhead(budget.total)
    _consume(middling, 12 * MIB, 20)
    assert middling.target == pytest.approx(24 * MIB, rel=0.01)


def test_a_starved_consumer_doubles_the_target_until_the_ceiling() -> None:
    budget = Budget(64 * MIB)
    ahead = ReadAhead(budget.total)
    _consume(ahead, 100_000, 20)
    assert ahead.target == budget.floor
    ahead.starved()
    assert ahead.target == 2 * budget.floor
    for _ in range(10):
        ahead.starved()
    assert ahead.target == budget.ceiling
    # Starving stops: the boost halves every half-life back towards what the rate asks.
    assert decay(1000.0, 1.0, half_life=1.0) == pytest.approx(500.0)
    assert decay(1000.0, -1.0) == 1000.0
    assert depth(0.0, budget, boost=10.0 * MIB) == 10 * MIB


def test_counts_decide_top_up_and_fetching() -> None:
    ahead = ReadAhead(16 * MIB)
    _consume(ahead, 1000, 20)
    budget = ahead.budget
    assert ahead.target == budget.floor
    assert ahead.want_more and ahead.low
    ahead.added(budget.floor // 2 + 1)
    assert ahead.want_more and not ahead.low  # fetcher paused, the queues still taking
    ahead.added(budget.floor)
    assert not ahead.want_more and not ahead.low
    assert ahead.peak == ahead.held
    ahead.taken(ahead.held - budget.floor // 2)
    assert ahead.low and ahead.want_more
    ahead.dropped(ahead.held)
    assert ahead.held == 0 and ahead.peak > 0


def test_one_pull_brings_about_the_room_left() -> None:
    assert pull_count(1000, 0.0, 2000) == 16  # no record seen yet: a small first pull
    assert pull_count(8 * MIB, 8192, 2000) == 1024
    assert pull_count(8 * MIB, 100, 2000) == 2000
    assert pull_count(-5, 8192, 2000) == 1  # over the target, a needed partition still gets one
    assert pull_count(3 * 8192, 8192, 2000) == 3  # never more than the room: the bound holds
    assert pull_count(10**9, 1, 5) == 5 and pull_count(0, 1, 5) == 1
    ahead = ReadAhead(64 * MIB)
    for _ in range(10):
        ahead.added(65536)
    assert ahead.pull(2000) == (ahead.target - ahead.held) // 65536


def test_librdkafka_takes_the_budget_s_client_config() -> None:
    from confluent_kafka import Consumer

    # Names and ranges are checked when the client is made: a typo or a value out of range
    # (fetch.queue.backoff.ms above 300,000) fails here, not in the first reader.
    consumer = Consumer({"bootstrap.servers": "localhost:1", "group.id": "g",
                         **Budget(MIN_READ_AHEAD).client_config()})
    consumer.close()


def test_share_is_each_partition_s_part_of_the_target_in_records() -> None:
    ahead = ReadAhead(64 * MIB)
    assert ahead.share(24) == 0  # no record seen yet: nothing to size a share by
    for _ in range(10):
        ahead.added(2048)
    assert ahead.share(24) == ahead.target // 2048 // 24
    assert ahead.share(1) == ahead.target // 2048
    assert ahead.share(0) == 0


def test_a_reader_is_held_by_its_caps_when_they_hold_no_more_than_half_the_target() -> None:
    ahead = ReadAhead(64 * MIB)
    assert not ahead.held_by_caps(8000, 2)  # no record seen yet: nothing to size the caps by
    for _ in range(10):
        ahead.added(2048)
    half = ahead.target // 2
    assert ahead.held_by_caps(half // 2048 // 2, 2)
    assert not ahead.held_by_caps(half // 2048 // 2 + 1, 2)


@dataclass
class _Lane:
    records: int
    paused: bool = False
    queue: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.queue = [0] * self.records


def _filled(held_fraction: float, record: int = 2048) -> ReadAhead:
    """A read-ahead that has seen records of ``record`` bytes and holds ``held_fraction`` of
    its target."""
    ahead = ReadAhead(64 * MIB)
    count = max(1, int(ahead.target * held_fraction) // record)
    for _ in range(count):
        ahead.added(record)
    return ahead


def test_short_is_half_the_share_and_at_most_half_the_cap() -> None:
    ahead = _filled(0.1)
    assert short(ahead, 4, 10**9) == ahead.share(4) // 2
    assert short(ahead, 4, 100) == 50


def test_at_half_the_target_or_below_the_short_paused_partitions_wake() -> None:
    ahead = _filled(0.25)
    cut = short(ahead, 3, 8000)
    lanes = [_Lane(cut, paused=True), _Lane(cut + 1, paused=True), _Lane(0)]
    assert waking(ahead, lanes, 8000) == [lanes[0]]
    assert pausing(ahead, lanes, 8000) == []


def test_above_half_the_target_the_partitions_over_half_their_share_pause() -> None:
    ahead = _filled(0.75)
    cut = short(ahead, 3, 8000)
    lanes = [_Lane(cut), _Lane(cut + 1), _Lane(cut + 1, paused=True)]
    assert pausing(ahead, lanes, 8000) == [lanes[1]]
    assert waking(ahead, lanes, 8000) == []


def test_a_partition_found_empty_wakes_with_those_whose_turn_comes_soon() -> None:
    ahead = _filled(0.75)
    cut = short(ahead, 3, 8000)
    empty, soon, full = _Lane(0, paused=True), _Lane(cut, paused=True), _Lane(cut + 5, paused=True)
    assert woken_with(full, [empty, soon, full], 3, ahead, 8000) == [empty, soon, full]
    assert woken_with(empty, [empty, soon, full], 3, ahead, 8000) == [empty, soon]


def test_a_refill_waits_only_when_the_caps_can_hold_more_than_half_the_target() -> None:
    ahead = _filled(0.1)
    assert not refill_after_wake(ahead, 1, 2)  # caps of one record: the caps pause, not the target
    assert refill_after_wake(ahead, 8000, 24)


def test_one_consume_brings_no_more_than_the_least_room_below_the_cap() -> None:
    ahead = _filled(0.1)
    assert pull_size(ahead, [_Lane(90), _Lane(10)], 2000, 100) == 10
    assert pull_size(ahead, [_Lane(100)], 2000, 100) == 1  # at the cap: still one record
    assert pull_size(ahead, [], 2000, 10**6) == ahead.pull(2000)
