"""Mixture logic without Kafka: weights, the schedule, its state, bad input."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.loader.nodes.mixing import (
    MixSchedule,
    check_entry,
    check_weights,
    normalised,
    parse_mix,
    tokens_delivered,
)
from kafeed.loader.settings import LoaderSettings
from tests.stateful_harness import Stateful, check_save_resume
from tests.stream_entries import stream_entry


@pytest.mark.parametrize(("weights", "words"), [
    ({"web": -0.1, "code": 1.0}, "must not be negative"),
    ({"web": 0.0, "code": 0}, "Every mixture weight is zero"),
    ({"web": math.nan}, "finite"),
    ({"web": math.inf, "code": 1}, "finite"),
    ({"web": "0.5"}, "not a number"),
    ({"web": True}, "not a number"),
    ({}, "mapping of source to weight"),
])
def test_bad_weights_are_one_sentence(weights: Any, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as err:
        check_weights(weights)
    assert err.value.message.count(". ") == 0 and err.value.message.endswith(".")


def test_parse_mix() -> None:
    assert parse_mix("web=0.6, code=0.3,books=0.1") == {"web": 0.6, "code": 0.3, "books": 0.1}
    for text, words in [("web", "not TOPIC=WEIGHT"), ("web=x", "not a number"), ("a=1,a=2", "twice"),
                        ("web=-1", "negative"), ("web=nan", "finite"), ("web=0,code=0", "zero")]:
        with pytest.raises(ConfigError, match=words):
            parse_mix(text)


@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.integers(0, 50), min_size=1, max_size=6).filter(lambda w: sum(w) > 0),
       count=st.integers(1, 3000), seed=st.integers(0, 2**32 - 1))
def test_schedule_keeps_every_prefix_within_two_windows(weights: list[int], count: int, seed: int) -> None:
    named = {f"s{i}": float(w) for i, w in enumerate(weights)}
    schedule = MixSchedule(named, seed=seed, index=3)
    total = sum(named.values())
    seen: Counter[str] = Counter()
    for n, name in enumerate(schedule.pick(count), start=1):
        seen[name] += 1
        assert named[name] > 0  # a zero weight is never picked
        if n % 97 == 0 or n == count:
            for source, weight in named.items():
                assert abs(seen[source] - n * weight / total) < 2, (source, n)


@pytest.mark.parametrize("scale", [5e-324, 1e-320, 1e-308, 1e-301, 1.0, 1e301, 1e307, 1e308, 1.7e308])
def test_proportions_hold_at_every_scale_of_the_float_range(scale: float) -> None:
    # The window counts depend on the weights' ratios only, however large or small they are
    # (1e308 each overflowed the total, 1e-320 each lost the credits' precision).
    for ratio in (1.0, 0.5, 0.25):
        weights = check_weights({"a": scale, "b": scale * ratio})
        picks = Counter(MixSchedule(weights, seed=4, index=0).pick(6600))
        if scale * ratio > 0:  # (5e-324 * 0.5 is zero)
            assert abs(picks["b"] - 6600 * ratio / (1 + ratio)) < 2, (scale, ratio, picks)
    # A weight that is a tiny share of a huge one gets none, and the run still goes on.
    lopsided = check_weights({"a": 1e308, "b": 1e-320})
    assert Counter(MixSchedule(lopsided, seed=4, index=0).pick(500)) == {"a": 500}


def test_dry_sources_share_out_their_weight() -> None:
    schedule = MixSchedule({"a": 0.5, "b": 0.3, "c": 0.2}, seed=1, index=0)
    picks = Counter(schedule.pick(8000, dry=["a"]))
    assert set(picks) == {"b", "c"}
    assert abs(picks["b"] / 8000 - normalised(schedule.weights, ["b", "c"])["b"]) < 0.001
    assert schedule.pick(5, dry=["a", "b", "c"]) == []


def test_schedule_save_resume_and_a_weight_change() -> None:
    case = Stateful(make=lambda: MixSchedule({"a": 0.6, "b": 0.3, "c": 0.1}, seed=9, index=2),
                    step=lambda s: s.pick(7), state=lambda s: s.state(),
                    load=lambda s, state: s.reset(state))
    check_save_resume(case, 13, 40)
    old = MixSchedule({"a": 0.6, "b": 0.4}, seed=9, index=2)
    old.pick(11)
    new = MixSchedule({"a": 0.1, "b": 0.9}, seed=9, index=2)
    new.reset(json.loads(json.dumps(old.state())))
    picks = Counter(new.pick(1000))
    assert abs(picks["b"] - 900) <= 2
    # Different readers start from different, seeded credits.
    assert MixSchedule({"a": 1, "b": 1}, seed=0, index=0).credits != MixSchedule({"a": 1, "b": 1}, seed=0,
                                                                                 index=1).credits


def _entry() -> dict[str, Any]:
    return {"version": 1, "index": 1, "sources": {"a": stream_entry(1, {}), "b": stream_entry(1, {})},
            "schedule": {"version": 1, "weights": {"a": 0.5, "b": 0.5}, "credits": {"a": 0.1, "b": -0.1}},
            "tokens": {"a": 32, "b": 16}, "dry": ["b"]}


def test_entry_checks() -> None:
    sources = {n: LoaderSettings(topics=(n,), seq_len=7, eos_id=0) for n in ("a", "b")}
    check_entry(_entry(), "readers['1']", sources)
    bad: list[tuple[list[str], Any, str]] = [
        (["tokens"], {"a": -1, "b": 0}, "tokens"), (["dry"], ["c"], "dry"), (["dry"], ["a", "a"], "dry"),
        (["schedule", "credits"], {"a": "x", "b": 0.0}, "schedule.credits"),
        (["schedule", "weights"], {"a": 1.0}, "schedule.weights"),
        (["version"], 2, r"readers\['1'\] \(mixture node\) version 2 is not supported"),
        (["schedule", "version"], 0, r"schedule \(schedule node\) version 0 is not supported")]
    for path, value, field in bad:
        entry = _entry()
        node = entry
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(ResumeMismatch, match=field):
            check_entry(entry, "readers['1']", sources)
    entry = _entry()
    entry["sources"]["b"]["index"] = 0
    with pytest.raises(ResumeMismatch, match="index"):
        check_entry(entry, "readers['1']", sources)
    assert tokens_delivered({"readers": {"0": _entry(), "1": _entry()}}) == {"a": 64, "b": 32}


def test_a_mixture_refuses_max_wait() -> None:
    import kafeed

    with pytest.raises(ConfigError, match="does not take max_wait_s"):
        kafeed.Mixture({"web": 0.6, "code": 0.4}, seq_len=8, eos_id=0, end=None, max_wait_s=0.01)


def test_a_mixture_prefetches_a_block_of_batches_unless_told() -> None:
    import kafeed
    from kafeed.loader.nodes.mixture_stream import AHEAD

    weights = {"web": 0.6, "code": 0.4}
    assert kafeed.Mixture(weights, seq_len=8, eos_id=0).settings.prefetch_batches == AHEAD
    assert kafeed.Mixture(weights, seq_len=8, eos_id=0, prefetch_batches=2).settings.prefetch_batches == 2
    given = LoaderSettings(topics=("web", "code"), seq_len=8, eos_id=0, prefetch_batches=0)
    assert kafeed.Mixture(weights, settings=given).settings.prefetch_batches == 0
    unset = LoaderSettings(topics=("web", "code"), seq_len=8, eos_id=0)
    assert kafeed.Mixture(weights, settings=unset).settings.prefetch_batches == AHEAD
